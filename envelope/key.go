package envelope

import "time"

// The Model methods. Each key names one occurrence, so a consumer
// deduplicating on it cannot collapse two; the package documentation lists
// every derivation.

// EventType returns EventContentFetch.
func (*ContentFetch) EventType() string { return EventContentFetch }

// Key returns the command_id: a command is one occurrence.
func (m *ContentFetch) Key() string { return m.CommandID }

// When returns OccurredAt.
func (m *ContentFetch) When() time.Time { return m.OccurredAt }

// Version returns SchemaVersion as set (ToWire writes 0 as SchemaVersion).
func (m *ContentFetch) Version() int { return m.SchemaVersion }

// EventType returns EventBlobAvailable.
func (*BlobAvailable) EventType() string { return EventBlobAvailable }

// Key returns content_fingerprint:command_id. Not the bare fingerprint: two
// commands fetching the same bytes are two facts.
func (m *BlobAvailable) Key() string { return m.ContentFingerprint + ":" + m.CommandID }

// When returns OccurredAt.
func (m *BlobAvailable) When() time.Time { return m.OccurredAt }

// Version returns SchemaVersion as set (ToWire writes 0 as SchemaVersion).
func (m *BlobAvailable) Version() int { return m.SchemaVersion }

// EventType returns EventFetchFailed.
func (*FetchFailed) EventType() string { return EventFetchFailed }

// Key returns command_id:occurred_at, the time as FormatTime writes it. Not
// the bare command_id: a command may fail more than once, and a consumer
// deduplicating on the key must not drop the terminal failure.
func (m *FetchFailed) Key() string { return m.CommandID + ":" + FormatTime(m.OccurredAt) }

// When returns OccurredAt.
func (m *FetchFailed) When() time.Time { return m.OccurredAt }

// Version returns SchemaVersion as set (ToWire writes 0 as SchemaVersion).
func (m *FetchFailed) Version() int { return m.SchemaVersion }

// EventType returns EventFetchPolicyState.
func (*FetchPolicyState) EventType() string { return EventFetchPolicyState }

// Key returns the host: the latest state per host is what counts.
func (m *FetchPolicyState) Key() string { return m.Host }

// When returns OccurredAt.
func (m *FetchPolicyState) When() time.Time { return m.OccurredAt }

// Version returns SchemaVersion as set (ToWire writes 0 as SchemaVersion).
func (m *FetchPolicyState) Version() int { return m.SchemaVersion }

// EventType returns EventContentReplicate.
func (*ContentReplicate) EventType() string { return EventContentReplicate }

// Key returns the command_id: a command is one occurrence.
func (m *ContentReplicate) Key() string { return m.CommandID }

// When returns OccurredAt.
func (m *ContentReplicate) When() time.Time { return m.OccurredAt }

// Version returns SchemaVersion as set (ToWire writes 0 as SchemaVersion).
func (m *ContentReplicate) Version() int { return m.SchemaVersion }

// EventType returns EventReplicationComplete.
func (*ReplicationComplete) EventType() string { return EventReplicationComplete }

// Key returns command_id:occurred_at, the time as FormatTime writes it. Not
// the bare command_id: a redelivery onto identical bytes announces the same
// copy again, and each announcement is its own occurrence.
func (m *ReplicationComplete) Key() string { return m.CommandID + ":" + FormatTime(m.OccurredAt) }

// When returns OccurredAt.
func (m *ReplicationComplete) When() time.Time { return m.OccurredAt }

// Version returns SchemaVersion as set (ToWire writes 0 as SchemaVersion).
func (m *ReplicationComplete) Version() int { return m.SchemaVersion }

// EventType returns EventReplicationFailed.
func (*ReplicationFailed) EventType() string { return EventReplicationFailed }

// Key returns command_id:occurred_at, the time as FormatTime writes it, for
// the reason FetchFailed's key carries the time.
func (m *ReplicationFailed) Key() string { return m.CommandID + ":" + FormatTime(m.OccurredAt) }

// When returns OccurredAt.
func (m *ReplicationFailed) When() time.Time { return m.OccurredAt }

// Version returns SchemaVersion as set (ToWire writes 0 as SchemaVersion).
func (m *ReplicationFailed) Version() int { return m.SchemaVersion }

// Compile-time checks that every model satisfies Model.
var (
	_ Model = (*ContentFetch)(nil)
	_ Model = (*BlobAvailable)(nil)
	_ Model = (*FetchFailed)(nil)
	_ Model = (*FetchPolicyState)(nil)
	_ Model = (*ContentReplicate)(nil)
	_ Model = (*ReplicationComplete)(nil)
	_ Model = (*ReplicationFailed)(nil)
)
