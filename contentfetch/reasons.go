package contentfetch

import (
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
)

// reason is the fetch_failed token of a permanent failure's cause: the one
// place the fetcher's causes meet the contract's vocabulary
// (docs/taxonomy.md, The failure taxonomy). A cause with no token here is
// a bug, reported as one.
func reason(c fetch.Cause) envelope.Reason {
	switch c {
	case fetch.CauseRefused:
		return envelope.ReasonDestinationRefused
	case fetch.CauseNotFetchable:
		return envelope.ReasonNotFetchable
	case fetch.CauseInvalidOptions:
		return envelope.ReasonInvalidRequestOptions
	case fetch.CauseTooLarge:
		return envelope.ReasonTooLarge
	case fetch.CauseRobotsDisallowed:
		return envelope.ReasonRobotsDisallowed
	case fetch.CauseStatus:
		return envelope.ReasonHTTPStatus
	}
	return envelope.ReasonHandlerError
}
