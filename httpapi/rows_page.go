package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/acme/retention/catalog"
)

// serviceRowKeys are the fields the service adds to a row's document; they win over the event's own.
var serviceRowKeys = [][]byte{[]byte(`"_id"`), []byte(`"timestamp"`), []byte(`"_ingestedAt"`), []byte(`"_expiresAt"`), []byte(`"_expired"`), []byte(`"_replacedAt"`)}

// writeRowsPage writes a page of rows in the HAL shape of Adobe's newer APIs: {"_embedded":{"rows":[…]},
// "_links":{…}}. Each row's payload is spliced in as Postgres printed it, compacted, beside the service's fields,
// rather than decoded and encoded again: for a page of large rows, decoding and encoding took most of the page's CPU time and
// held the page three times over. A payload that holds one of the service's keys anywhere (at its top it never
// does: ingestion takes them out) goes through rowDocument, so that a service field always wins. Each payload is
// dropped once written, so the page is held about once.
func writeRowsPage(buf *bytes.Buffer, rows []catalog.Row, links map[string]link) error {
	buf.WriteString(`{"_embedded":{"rows":[`)
	for i := range rows {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := writeRow(buf, rows[i]); err != nil {
			return err
		}
		rows[i].Payload = nil
	}
	buf.WriteString(`]},"_links":`)
	raw, err := marshal(links)
	if err != nil {
		return err
	}
	buf.Write(raw)
	buf.WriteString("}\n")
	return nil
}

// writeRow writes one row's document: what rowDocument makes, its keys in another order.
func writeRow(buf *bytes.Buffer, r catalog.Row) error {
	payload := bytes.TrimSpace(r.Payload)
	spliceable := len(payload) >= 2 && payload[0] == '{' && payload[len(payload)-1] == '}'
	for _, k := range serviceRowKeys {
		spliceable = spliceable && !bytes.Contains(payload, k)
	}
	if !spliceable {
		doc, err := rowDocument(r)
		if err != nil {
			return err
		}
		raw, err := marshal(doc)
		if err != nil {
			return err
		}
		buf.Write(raw)
		return nil
	}
	id, err := marshal(r.ID)
	if err != nil {
		return err
	}
	buf.WriteString(`{"_id":`)
	buf.Write(id)
	buf.WriteString(`,"timestamp":"` + r.Timestamp.UTC().Format(time.RFC3339Nano))
	buf.WriteString(`","_ingestedAt":"` + r.IngestedAt.UTC().Format(time.RFC3339Nano) + `"`)
	if r.Expiry != nil {
		buf.WriteString(`,"_expiresAt":"` + r.Expiry.UTC().Format(time.RFC3339Nano) + `"`)
	}
	if r.Expired {
		buf.WriteString(`,"_expired":true`)
	}
	if r.ReplacedAt != nil {
		buf.WriteString(`,"_replacedAt":"` + r.ReplacedAt.UTC().Format(time.RFC3339Nano) + `"`)
	}
	// PostgreSQL writes jsonb with a space after each colon and comma; the answer is compact throughout.
	var compact bytes.Buffer
	if err := json.Compact(&compact, payload); err != nil {
		return fmt.Errorf("stored row %s: %w", r.ID, err)
	}
	payload = compact.Bytes()
	if inner := payload[1 : len(payload)-1]; len(inner) > 0 {
		buf.WriteByte(',')
		buf.Write(inner)
	}
	buf.WriteByte('}')
	return nil
}
