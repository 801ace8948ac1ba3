package fetch_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
)

// TestClassifyCauses pins the permanent rows of Classify's table: each
// sentinel, however wrapped, names its cause, and only a permanent failure
// has one.
func TestClassifyCauses(t *testing.T) {
	tests := []struct {
		err  error
		want fetch.Class
	}{
		{fetch.ErrURLRefused, fetch.Class{Cause: fetch.CauseRefused}},
		// The hook's own error may name any sentinel: a refusal stays one.
		{fmt.Errorf("%w: %w", fetch.ErrURLRefused, fetch.ErrTooLarge), fetch.Class{Cause: fetch.CauseRefused}},
		{guard.ErrRefused, fetch.Class{Cause: fetch.CauseRefused}},
		{fetch.ErrNotFetchable, fetch.Class{Cause: fetch.CauseNotFetchable}},
		{guard.ErrInvalidHost, fetch.Class{Cause: fetch.CauseNotFetchable}},
		{guard.ErrInvalidOptions, fetch.Class{Cause: fetch.CauseInvalidOptions}},
		{fetch.ErrTooLarge, fetch.Class{Cause: fetch.CauseTooLarge}},
		{fetch.ErrRobotsDisallowed, fetch.Class{Cause: fetch.CauseRobotsDisallowed}},
		{&fetch.StatusError{StatusCode: 404}, fetch.Class{Cause: fetch.CauseStatus, StatusCode: 404}},
		{&fetch.StatusError{StatusCode: 600}, fetch.Class{Cause: fetch.CauseStatus, StatusCode: 600}},
		{&fetch.StatusError{StatusCode: 503}, fetch.Class{Retry: true}},
		{fetch.ErrTimeout, fetch.Class{Retry: true}},
		{fetch.ErrContentCoding, fetch.Class{}},
		{fetch.ErrRobotsUnreachable, fetch.Class{}},
		{errors.New("anything else"), fetch.Class{}},
	}
	for _, tt := range tests {
		err := fmt.Errorf("wrapped: %w", tt.err)
		got := fetch.Classify(err)
		if got != tt.want {
			t.Errorf("Classify(%v) = %+v, want %+v", err, got, tt.want)
		}
		if got.Permanent() != (tt.want.Cause != fetch.CauseNone) {
			t.Errorf("Classify(%v).Permanent() = %t with cause %v", err, got.Permanent(), got.Cause)
		}
	}
}

func TestCauseString(t *testing.T) {
	for c, want := range map[fetch.Cause]string{
		fetch.CauseNone:    "none",
		fetch.CauseRefused: "refused",
		fetch.CauseStatus:  "status",
		200:                "Cause(200)",
	} {
		if got := c.String(); got != want {
			t.Errorf("Cause(%d).String() = %q, want %q", uint8(c), got, want)
		}
	}
}
