package queue

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Frame is one entry of a queue as clients see it: EAS's DataFrame.
type Frame struct {
	Index   uint64
	Data    []byte
	Tags    map[string]string
	Message string
	// Deliveries is how many times a watcher has been handed this entry,
	// this time included (not on the wire).
	Deliveries int64
}

// record is what the store keeps per entry: the frame and its delivery
// state. It is encoded with protobuf's wire format (field numbers below),
// so that a field added later reads old records.
type record struct {
	Frame
	Priority   int64
	Deliveries int64 // times handed to a consumer
	Enqueued   int64 // unix nanoseconds
}

const (
	fData       = 1
	fTag        = 2 // repeated: a message of key (1) and value (2)
	fMessage    = 3
	fPriority   = 4
	fDeliveries = 5
	fEnqueued   = 6
)

func (r *record) marshal() []byte {
	b := make([]byte, 0, len(r.Data)+64)
	b = protowire.AppendTag(b, fData, protowire.BytesType)
	b = protowire.AppendBytes(b, r.Data)
	b = appendMap(b, fTag, r.Tags)
	if r.Message != "" {
		b = protowire.AppendTag(b, fMessage, protowire.BytesType)
		b = protowire.AppendString(b, r.Message)
	}
	for _, f := range []struct {
		num protowire.Number
		v   int64
	}{{fPriority, r.Priority}, {fDeliveries, r.Deliveries}, {fEnqueued, r.Enqueued}} {
		if f.v != 0 {
			b = protowire.AppendTag(b, f.num, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(f.v))
		}
	}
	return b
}

var errCorrupt = errors.New("queue: corrupt record")

func (r *record) unmarshal(b []byte) error {
	err := r.view(b)
	r.Data = append([]byte(nil), r.Data...)
	return err
}

// view is unmarshal with Data aliasing b: inside a bbolt transaction it
// reads an entry's tags without copying its data.
func (r *record) view(b []byte) error {
	*r = record{}
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case typ == protowire.BytesType && num == fData:
			r.Data = v
		case typ == protowire.BytesType && num == fMessage:
			r.Message = string(v)
		case typ == protowire.BytesType && num == fTag:
			k, val, err := parseTag(v)
			if err != nil {
				return err
			}
			if r.Tags == nil {
				r.Tags = map[string]string{}
			}
			r.Tags[k] = val
		case typ == protowire.VarintType && num == fPriority:
			r.Priority = int64(x)
		case typ == protowire.VarintType && num == fDeliveries:
			r.Deliveries = int64(x)
		case typ == protowire.VarintType && num == fEnqueued:
			r.Enqueued = int64(x)
		}
		return nil
	})
}

// parseTag reads one map entry: key (1) and value (2).
func parseTag(b []byte) (k, v string, err error) {
	err = fields(b, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return fmt.Errorf("%w: tag entry", errCorrupt)
		}
		switch num {
		case 1:
			k = string(val)
		case 2:
			v = string(val)
		}
		return nil
	})
	return k, v, err
}
