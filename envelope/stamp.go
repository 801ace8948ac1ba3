package envelope

import "time"

// FrameFields returns a frame's six field names in the order a publisher
// writes them: the order of a Frame's values. The array is a copy, so no
// caller can change the order another one sees.
func FrameFields() [6]string {
	return [6]string{FieldKey, FieldPayload, FieldEventType, FieldSchemaVersion, FieldOccurredAt, FieldContentType}
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
	case *BlobPersisted:
		v.OccurredAt = t
	case *PersistFailed:
		v.OccurredAt = t
	}
}
