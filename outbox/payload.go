package outbox

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// Version is the payload format version Emit writes and Decode reads.
const Version = 1

// payload is the JSON form of a Message, format version 1; docs/outbox.md
// specifies it for emitters in other languages.
type payload struct {
	V           int             `json:"v"`
	Topic       string          `json:"topic"`
	Key         *string         `json:"key,omitempty"`
	Value       *string         `json:"value,omitempty"`
	ValueBase64 *string         `json:"value_base64,omitempty"`
	Headers     []payloadHeader `json:"headers,omitempty"`
}

type payloadHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Marshal returns m's payload, the content Emit passes to
// pg_logical_emit_message, after checking m as Emit does with
// DefaultMaxBytes. A value that is text is written as "value", any other
// as "value_base64".
func Marshal(m Message) ([]byte, error) {
	return marshal(m, DefaultMaxBytes)
}

func marshal(m Message, maxBytes int) ([]byte, error) {
	if err := m.validate(maxBytes); err != nil {
		return nil, err
	}
	p := payload{V: Version, Topic: m.Topic}
	if m.Key != nil {
		k := string(m.Key)
		p.Key = &k
	}
	if m.Value != nil {
		v := string(m.Value)
		if isText(m.Value) {
			p.Value = &v
		} else {
			v = base64.StdEncoding.EncodeToString(m.Value)
			p.ValueBase64 = &v
		}
	}
	for _, h := range m.Headers {
		p.Headers = append(p.Headers, payloadHeader{Name: h.Name, Value: string(h.Value)})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("outbox: encoding the payload of a message for topic %q: %w", m.Topic, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ErrBadPayload is the error Unmarshal returns, wrapped with what is
// wrong, for content that is not a valid payload; test with errors.Is.
var ErrBadPayload = errors.New("outbox: invalid payload")

// Unmarshal reads a payload, as Marshal or any other emitter following
// docs/outbox.md wrote it, and checks the message as Emit does with
// maxBytes (0 means DefaultMaxBytes). pgcdc calls it on each outbox
// message it receives; a payload it refuses is dead-lettered. A payload
// that parses but breaks a rule of Message (a *MessageError) is
// returned as read along with the error.
func Unmarshal(content []byte, maxBytes int) (Message, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	bad := func(format string, args ...any) (Message, error) {
		return Message{}, fmt.Errorf("%w: %s", ErrBadPayload, fmt.Sprintf(format, args...))
	}
	var p payload
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return bad("not a JSON object of the outbox format: %v", err)
	}
	if dec.More() {
		return bad("more after the JSON object")
	}
	if p.V != Version {
		return bad(`"v" is %d; this version reads format version %d`, p.V, Version)
	}
	m := Message{Topic: p.Topic}
	if p.Key != nil {
		m.Key = []byte(*p.Key)
	}
	switch {
	case p.Value != nil && p.ValueBase64 != nil:
		return bad(`both "value" and "value_base64" are set; give one`)
	case p.Value != nil:
		m.Value = []byte(*p.Value)
	case p.ValueBase64 != nil:
		v, err := base64.StdEncoding.DecodeString(*p.ValueBase64)
		if err != nil {
			return bad(`"value_base64" is not standard base64 with padding: %v`, err)
		}
		m.Value = v
	}
	for _, h := range p.Headers {
		m.Headers = append(m.Headers, Header{Name: h.Name, Value: []byte(h.Value)})
	}
	if err := m.validate(maxBytes); err != nil {
		return m, err
	}
	return m, nil
}
