package fetch

import (
	"context"
	"fmt"
	"net/url"
)

// checkHop runs the fetcher's CheckURL, then the request's, on one hop.
// Each sees a copy of u, so a hook cannot change where the hop goes.
func (f *Fetcher) checkHop(ctx, fetchCtx context.Context, check func(context.Context, *url.URL) error, u *url.URL) error {
	for _, c := range [...]func(context.Context, *url.URL) error{f.checkURL, check} {
		if c == nil {
			continue
		}
		hop := *u
		if err := c(fetchCtx, &hop); err != nil {
			// A hook cut short by the caller or the fetch's deadline has
			// refused nothing: that is the context's failure, told apart
			// as any other.
			if fetchCtx.Err() != nil {
				return f.ioError(ctx, fetchCtx, nil, u, err)
			}
			return fmt.Errorf("%w: %s: %w", ErrURLRefused, shown(u), err)
		}
	}
	return nil
}
