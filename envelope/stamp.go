package envelope

import "time"

// FrameFields are a frame's six fields in the order a publisher writes
// them.
var FrameFields = []string{
	FieldKey, FieldPayload, FieldEventType, FieldSchemaVersion, FieldOccurredAt, FieldContentType,
}

// Stamp sets a fact's occurred_at to t: a worker stamps each fact as it
// publishes it. Other models are left alone.
func Stamp(m Model, t time.Time) {
	switch v := m.(type) {
	case *BlobAvailable:
		v.OccurredAt = t
	case *FetchFailed:
		v.OccurredAt = t
	case *ReplicationComplete:
		v.OccurredAt = t
	case *ReplicationFailed:
		v.OccurredAt = t
	}
}
