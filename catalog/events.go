package catalog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
)

// EventFormat is how an ingestion body holds its events.
type EventFormat int

const (
	// NDJSON is one event per line (application/x-ndjson). Blank lines are skipped, yet counted, so that an event's
	// line is the one an editor shows.
	NDJSON EventFormat = iota
	// JSONArray is one JSON array of events (application/json); an event's line is its position in the array.
	JSONArray
)

// MaxEventLine bounds a line of an NDJSON body, its newline included. It is the bound of an event's fields as stored
// (MaxRowPayloadBytes), so that a line cannot grow in storage past what it could have been sent as; a longer line is
// refused whole and the reader goes on at the next one. The elements of a JSON array have no bound of their own
// beyond MaxRowPayloadBytes: the array is read by a JSON decoder, which holds an element whole to find its end.
const MaxEventLine = MaxRowPayloadBytes

// Event is one event of an ingestion body, validated: Row when Err is nil, else why it was refused (an EINVALID
// error naming the field and the rule).
type Event struct {
	Line int // 1-based: the line of an NDJSON body, or the position in a JSON array
	Row  RowInput
	Err  error
}

// EventReader reads the events of an ingestion body one at a time, never holding the body whole, and validates each
// against the rules of its dataset (RowContext.ParseRow). The API and retentionctl load read through it, so a line
// one of them accepts is one the other accepts. Like bufio.Scanner: Next advances to the next event, Event returns
// it, and once Next has returned false, Err says why the body could not be read to its end, or nil at its end. A
// refused event does not stop the reader; a body that breaks does.
type EventReader struct {
	rules RowContext
	src   eventSource
	ev    Event
}

// eventSource yields the raw events of a body in one format.
type eventSource interface {
	// read returns the next event; ok is false at the end of the body, or once it broke.
	read() (ev rawEvent, ok bool)
	// err is why the body broke: nil at its end.
	err() error
}

// rawEvent is an event as a body holds it, before validation.
type rawEvent struct {
	line    int
	data    []byte // valid until the next read
	refused error  // why the line cannot be an event, whatever it holds
}

// NewEventReader returns a reader of the events of r, held in format and validated against rules.
func NewEventReader(r io.Reader, format EventFormat, rules RowContext) *EventReader {
	var src eventSource
	if format == JSONArray {
		src = &arraySource{dec: json.NewDecoder(r)}
	} else {
		src = &ndjsonSource{br: bufio.NewReaderSize(r, 64<<10)}
	}
	return &EventReader{rules: rules, src: src}
}

// Next reads and validates the next event, which Event then returns. It returns false at the end of the body, or
// when the body broke (Err).
func (r *EventReader) Next() bool {
	raw, ok := r.src.read()
	if !ok {
		r.ev = Event{}
		return false
	}
	r.ev = Event{Line: raw.line, Err: raw.refused}
	if raw.refused == nil {
		r.ev.Row, r.ev.Err = r.rules.ParseRow(raw.data)
		r.ev.Row.Line = raw.line
	}
	return true
}

// Event returns the event Next read.
func (r *EventReader) Event() Event { return r.ev }

// Err returns why the body could not be read to its end, once Next has returned false: the reader's own error (a
// size limit, a broken connection), or an EINVALID malformed-json error for an array that is not whole JSON. It is
// nil when the body was read to its end.
func (r *EventReader) Err() error { return r.src.err() }

// Rows returns the rows of the valid events, read as the sequence is ranged over, and records each refused event in
// res as it goes: what a RowWriter writes.
func (r *EventReader) Rows(res *IngestResult) iter.Seq[RowInput] {
	return func(yield func(RowInput) bool) {
		for r.Next() {
			res.Read = max(res.Read, r.ev.Line)
			if r.ev.Err != nil {
				res.Reject(r.ev.Line, r.ev.Err)
				continue
			}
			if !yield(r.ev.Row) {
				return
			}
		}
	}
}

// ndjsonSource reads an NDJSON body a line at a time.
type ndjsonSource struct {
	br     *bufio.Reader
	line   int
	buf    []byte // a line longer than br's buffer, gathered; reused from line to line
	failed error
	done   bool
}

func (s *ndjsonSource) read() (rawEvent, bool) {
	for !s.done {
		s.line++
		data, tooLong, err := s.readLine()
		if err != nil {
			s.done = true
			if !errors.Is(err, io.EOF) {
				s.failed = err
			}
		}
		if tooLong {
			return rawEvent{line: s.line, refused: Errorf(EINVALID, "the event is longer than %d bytes", MaxEventLine)}, true
		}
		if len(bytes.TrimSpace(data)) > 0 {
			// Trailing whitespace ends no JSON value and shifts no offset an error names; without it the decoder
			// of ParseRow finds the end of the event without reading further.
			return rawEvent{line: s.line, data: bytes.TrimRight(data, " \t\r\n")}, true
		}
	}
	return rawEvent{}, false
}

func (s *ndjsonSource) err() error { return s.failed }

// readLine reads one line, discarding the rest of a line longer than MaxEventLine. A line within br's buffer is
// returned in place, without a copy: ParseRow keeps nothing of it.
func (s *ndjsonSource) readLine() ([]byte, bool, error) {
	s.buf = s.buf[:0]
	for {
		chunk, err := s.br.ReadSlice('\n')
		if len(s.buf)+len(chunk) > MaxEventLine {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = s.br.ReadSlice('\n')
			}
			return nil, true, err
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if len(s.buf) == 0 {
				return chunk, false, err
			}
			s.buf = append(s.buf, chunk...)
			return s.buf, false, err
		}
		s.buf = append(s.buf, chunk...)
	}
}

// arraySource reads the elements of a JSON array body one at a time.
type arraySource struct {
	dec     *json.Decoder
	n       int             // elements read
	raw     json.RawMessage // the element read last; its memory is reused
	started bool
	done    bool
	failed  error
}

func (s *arraySource) read() (rawEvent, bool) {
	if s.done {
		return rawEvent{}, false
	}
	if !s.started {
		s.started = true
		if tok, err := s.dec.Token(); err != nil || tok != json.Delim('[') {
			return s.broken(err, "an application/json body must be a JSON array of events")
		}
	}
	if !s.dec.More() {
		return s.end()
	}
	if err := s.dec.Decode(&s.raw); err != nil {
		// A syntax error leaves the decoder lost: the rest of the array cannot be read.
		return s.broken(err, "element %d of the array and everything after it is not valid JSON: %v", s.n+1, JSONErrorText(err))
	}
	s.n++
	return rawEvent{line: s.n, data: s.raw}, true
}

// end checks that the array is closed, and that nothing follows it. More also says no at the end of the body: only
// a bracket closes the array, else the body was cut short.
func (s *arraySource) end() (rawEvent, bool) {
	if tok, err := s.dec.Token(); err != nil || tok != json.Delim(']') {
		return s.broken(err, "the JSON array of events is not closed: the body ends after element %d without ]", s.n)
	}
	if _, err := s.dec.Token(); !errors.Is(err, io.EOF) {
		return s.broken(err, "the body goes on after the ] that closes its array of events")
	}
	s.done = true
	return rawEvent{}, false
}

// broken ends the array on err: the reader's own error as it is, anything else as the body's malformed JSON.
func (s *arraySource) broken(err error, format string, args ...any) (rawEvent, bool) {
	s.done = true
	if isReadError(err) {
		s.failed = err
	} else {
		s.failed = Invalid("malformed-json", "body", format, args...)
	}
	return rawEvent{}, false
}

func (s *arraySource) err() error { return s.failed }

// isReadError tells the error of the body's reader from a decoder's verdict on its JSON.
func isReadError(err error) bool {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &syntax) && !errors.As(err, &typ)
}

// JSONErrorText says what a JSON decoder found wrong with a body, for its sender: the syntax error and the byte it
// is at, or that the body is empty or cut short.
func JSONErrorText(err error) string {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Sprintf("%v (at byte %d)", syntax, syntax.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the body is empty or cut short"
	}
	return err.Error()
}
