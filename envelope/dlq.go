package envelope

// A dead letter is the original frame's fields plus these two.
const (
	// FieldDLQReason says why the frame was dead-lettered: one of the DLQ*
	// reasons below, or the failure's reason token (http_status,
	// handler_error, …).
	FieldDLQReason = "dlq_reason"
	// FieldDLQOriginalID is the entry id the frame had on its stream.
	FieldDLQOriginalID = "dlq_original_id"
)

// Dead-letter reasons of frames refused before any handling.
const (
	// DLQMalformedFrame: the frame does not decode.
	DLQMalformedFrame = "malformed_frame"
	// DLQForeignPayload: the frame decodes to another kind of model; any
	// command_id in it belongs to another command, so nothing is announced.
	DLQForeignPayload = "foreign_payload"
	// DLQBlankCommandID: the command has no command_id to correlate or
	// dedupe on.
	DLQBlankCommandID = "blank_command_id"
)
