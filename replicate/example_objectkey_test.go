package replicate_test

import (
	"errors"
	"fmt"

	"github.com/replicator-go/replicator/replicate"
)

func ExampleObjectKey() {
	// The alias binds the root ("reps"); the command says only where under it.
	key, err := replicate.ObjectKey("reps", "organizations/x/2026/report (final).pdf")
	fmt.Println(key, err)

	// Refused, never repaired: a command cannot climb out of the root.
	_, err = replicate.ObjectKey("reps", "../reps-other/report.pdf")
	fmt.Println(err)
	_, err = replicate.ObjectKey("reps", "a/b%2Fc.pdf")
	fmt.Println(errors.Is(err, replicate.ErrInvalidDestination), err)
	// Output:
	// reps/organizations/x/2026/report (final).pdf <nil>
	// replicate: invalid destination: destination is not a usable key: it has a relative segment
	// true replicate: invalid destination: destination carries percent-encoding; send the rendered path
}
