DROP TABLE row_id_filters;
