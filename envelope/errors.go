package envelope

import "errors"

// Sentinel errors. Every error the package returns wraps one of them with
// detail; check with errors.Is. Details name fields, never values a producer
// controls beyond the event type, so errors are safe to log.
var (
	// ErrMalformedFrame means the frame cannot be decoded: no fields, no
	// payload, an unknown event_type, invalid JSON, a missing required field,
	// a wrong JSON type, a naive or invalid time, or a payload whose
	// event_type disagrees with the frame's. The worker dead-letters such a
	// frame with reason malformed_frame.
	ErrMalformedFrame = errors.New("envelope: malformed frame")

	// ErrUnsupportedVersion means the payload's schema_version is not
	// SchemaVersion. FromWire returns it together with a partial model, so
	// the worker can still name the command in unsupported_schema_version.
	ErrUnsupportedVersion = errors.New("envelope: unsupported schema version")

	// ErrForeignPayload means DecodeCommand, DecodeReplicateCommand or
	// DecodePersistCommand was
	// given a valid frame of another model type (a fact, or the other
	// capability's command, on the command stream). Any command_id in it
	// belongs to another command, so nothing may be published about it.
	ErrForeignPayload = errors.New("envelope: foreign payload")

	// ErrUnencodable means ToWire was given a model it cannot write: nil, a
	// non-finite number, or a time outside the years 0000–9999.
	ErrUnencodable = errors.New("envelope: model cannot be encoded")
)
