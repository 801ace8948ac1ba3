package replicate

import (
	"time"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/quote"
)

// MaxDetailLength bounds a replication_failed detail, in bytes.
const MaxDetailLength = envelope.MaxDetailLength

// FailedFact builds a terminal replication_failed about cmd, echoing its
// command_id and the three ids verbatim. attempts is set on the fact only
// when positive (the loop passes the delivery count for handler_error);
// detail is bounded to MaxDetailLength and must never carry a credential.
// The loop uses it for the two reasons it owns:
//
//	FailedFact(cmd, envelope.ReplicateReasonHandlerError, err.Error(), attempts, now)
//	FailedFact(cmd, envelope.ReplicateReasonUnsupportedSchemaVersion, "schema_version=2", 0, now)
//
// For an unsupported version, cmd is the partial command
// envelope.DecodeReplicateCommand returns.
func FailedFact(cmd *envelope.ContentReplicate, reason envelope.ReplicateReason, detail string, attempts int, now time.Time) *envelope.ReplicationFailed {
	fact := &envelope.ReplicationFailed{
		SchemaVersion:     envelope.SchemaVersion,
		OccurredAt:        now,
		CommandID:         cmd.CommandID,
		InfoItemRepSpecID: cmd.InfoItemRepSpecID,
		SourceRevisionID:  cmd.SourceRevisionID,
		InfoSourceID:      cmd.InfoSourceID,
		Reason:            reason,
		Terminal:          true,
	}
	if attempts > 0 {
		fact.Attempts = new(attempts)
	}
	if detail != "" {
		fact.Detail = new(envelope.BoundDetail(detail))
	}
	return fact
}

// maxShown bounds how much of a command's value (a refused key, a source
// URI) an error carries: the error becomes a fact's detail and a dead
// letter's reason.
const maxShown = 120

// quoteBounded quotes a command's value for a detail, cut to maxShown.
func quoteBounded(s string) string {
	q, _ := quote.Bounded(s, maxShown)
	return q
}
