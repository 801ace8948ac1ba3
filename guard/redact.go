package guard

import (
	"net/url"
	"strings"
)

// redactedUserinfo stands in for a URL's userinfo in anything a person reads.
const redactedUserinfo = "xxxxx"

// RedactURL returns raw fit for a log line, an error message or a report: its
// userinfo, name and password alike, is replaced by "xxxxx". The name goes
// too because a credential is often carried there alone
// (https://TOKEN@host/). A value that does not parse as a URL loses
// everything between its scheme and its last '@', where userinfo would be;
// one without '@' is returned as it is. So does an opaque URL's text before
// its last '@' ("name:password@host" reads as scheme "name").
//
// A command's URL is the issuer's data and may carry credentials; every URL
// the worker logs or reports passes through RedactURL first.
func RedactURL(raw string) string {
	if strings.IndexByte(raw, '@') < 0 {
		return raw // no userinfo, nor text that could be taken for it
	}
	u, err := url.Parse(raw)
	if err != nil {
		at := strings.LastIndexByte(raw, '@')
		if at < 0 {
			return raw
		}
		start := 0
		if i := strings.Index(raw[:at], "://"); i >= 0 {
			start = i + len("://")
		}
		return raw[:start] + redactedUserinfo + raw[at:]
	}
	if at := strings.LastIndexByte(u.Opaque, '@'); at >= 0 {
		// "name:password@host" parses as scheme "name" with an opaque
		// remainder; what precedes the '@' may be a password.
		shown := *u
		shown.Opaque = redactedUserinfo + u.Opaque[at:]
		return shown.String()
	}
	if u.User == nil {
		return raw
	}
	shown := *u
	shown.User = url.User(redactedUserinfo)
	return shown.String()
}
