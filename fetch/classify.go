package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"strconv"

	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/sink"
)

// Class is what a failure means: whether the same request would fail the
// same way (Permanent, and why: Cause), and whether trying again soon could
// help (Retry). A failure that is neither is transient: it may heal later.
type Class struct {
	// Cause is why a permanent failure cannot succeed; CauseNone for any
	// other failure.
	Cause Cause
	// StatusCode is the final response's status when Cause is
	// CauseStatus.
	StatusCode int
	// Retry reports whether another attempt soon might succeed: the origin
	// or the network failed. Other transient failures may heal later, but
	// not within Get's retries, seconds apart.
	Retry bool
}

// Permanent reports that asking again cannot succeed.
func (c Class) Permanent() bool { return c.Cause != CauseNone }

// Cause is why a permanent failure cannot succeed, in the fetcher's terms.
// A caller that reports failures maps each onto its own vocabulary (the
// content.fetch handler onto the contract's reason tokens,
// docs/taxonomy.md).
type Cause uint8

// The causes of a permanent failure.
const (
	// CauseNone is the cause of a failure that is not permanent.
	CauseNone Cause = iota
	// CauseRefused: the destination guard (guard.ErrRefused) or a CheckURL
	// hook (ErrURLRefused) refused a hop; nothing was sent there.
	CauseRefused
	// CauseNotFetchable: a URL, asked for or a redirect's target, cannot be
	// fetched (ErrNotFetchable): not http or https with a host, unparsable,
	// a host with no ASCII form (guard.ErrInvalidHost), or one redirect
	// past the limit.
	CauseNotFetchable
	// CauseInvalidOptions: the request's headers or timeout failed the
	// sanitizer (guard.ErrInvalidOptions); nothing was sent.
	CauseInvalidOptions
	// CauseTooLarge: the body is over the size limit (ErrTooLarge); nothing
	// was stored.
	CauseTooLarge
	// CauseRobotsDisallowed: the origin's robots.txt refuses a hop
	// (ErrRobotsDisallowed); nothing was sent to it.
	CauseRobotsDisallowed
	// CauseStatus: the final response's status (*StatusError,
	// Class.StatusCode) is one that will not heal.
	CauseStatus
	causeCount
)

var causeNames = [causeCount]string{"none", "refused", "not fetchable", "invalid options", "too large", "robots disallowed", "status"}

// String names the cause, for logs and tests.
func (c Cause) String() string {
	if c < causeCount {
		return causeNames[c]
	}
	return "Cause(" + strconv.Itoa(int(c)) + ")"
}

// Classify is the one classification of failures, shared by Get (its
// retries) and the content.fetch handler (a command's outcome):
//
//	ErrURLRefused, guard.ErrRefused           Permanent  CauseRefused
//	ErrNotFetchable, guard.ErrInvalidHost     Permanent  CauseNotFetchable
//	guard.ErrInvalidOptions                   Permanent  CauseInvalidOptions
//	ErrTooLarge                               Permanent  CauseTooLarge
//	ErrRobotsDisallowed                       Permanent  CauseRobotsDisallowed
//	*StatusError other than the below         Permanent  CauseStatus
//	*StatusError 5xx (500-599), 408, 429;     Retry
//	  ErrNetwork, guard.ErrResolve,
//	  ErrTimeout, ErrDeadline
//	ErrNetwork (a certificate that failed     neither
//	  verification), ErrContentCoding,
//	  sink.ErrPermanent, ErrStorageFull,
//	  ErrStore, ErrRobotsUnreachable,
//	  context errors, anything else
//
// A 304 is not a failure (Result.NotModified).
func Classify(err error) Class {
	var status *StatusError
	switch {
	case errors.Is(err, ErrURLRefused):
		// First: the hook's own error, also wrapped, may name any sentinel,
		// and a refusal stays a refusal whatever it says.
		return Class{Cause: CauseRefused}
	case errors.Is(err, sink.ErrPermanent):
		// The origin did nothing wrong, so no cause fits, and retrying
		// will not help until an operator mends the grant.
		return Class{}
	case errors.Is(err, ErrNotFetchable), errors.Is(err, guard.ErrInvalidHost):
		// A host with no ASCII form can never be dialed: the URL is as
		// unusable as one that does not parse.
		return Class{Cause: CauseNotFetchable}
	case errors.Is(err, guard.ErrInvalidOptions):
		return Class{Cause: CauseInvalidOptions}
	case errors.Is(err, guard.ErrRefused):
		return Class{Cause: CauseRefused}
	case errors.Is(err, ErrTooLarge):
		return Class{Cause: CauseTooLarge}
	case errors.Is(err, ErrRobotsDisallowed):
		return Class{Cause: CauseRobotsDisallowed}
	case errors.Is(err, ErrRobotsUnreachable):
		// Refused from the cache until its back-off ends: retrying within
		// seconds would be refused the same way.
		return Class{}
	case errors.As(err, &status):
		if statusTransient(status.StatusCode) {
			return Class{Retry: true}
		}
		return Class{Cause: CauseStatus, StatusCode: status.StatusCode}
	case errors.Is(err, ErrDeadline), errors.Is(err, ErrTimeout):
		// The fetch's own bounds, told apart from the caller's below.
		return Class{Retry: true}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Class{}
	case errors.Is(err, ErrContentCoding):
		// Transient as httpx's decoding errors are for the reference; the
		// same corrupt stream would come back in seconds.
		return Class{}
	case errors.Is(err, ErrNetwork):
		// A certificate that failed verification fails the same way again
		// in seconds; the worker's retry, a reclaim later, may find it
		// renewed.
		return Class{Retry: !certificateRejected(err)}
	case errors.Is(err, guard.ErrResolve):
		return Class{Retry: true}
	}
	return Class{}
}

// statusTransient reports whether a final status may heal: a server error
// (500-599), 408 or 429. A status of 600 or more is no server error,
// whatever its first digit.
func statusTransient(code int) bool {
	return (code >= 500 && code <= 599) || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
}

func certificateRejected(err error) bool {
	var verify *tls.CertificateVerificationError
	var authority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &verify) || errors.As(err, &authority) ||
		errors.As(err, &hostname) || errors.As(err, &invalid)
}
