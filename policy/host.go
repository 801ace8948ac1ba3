package policy

import (
	"net/netip"
	"strings"

	"github.com/replicator-go/replicator/guard"
)

// HostKey returns the key under which host is paced and its published
// policy is kept, for a URL's hostname (url.URL.Hostname: no port, no
// brackets). Spellings that reach the same destination share one key:
//
//   - a name is the ASCII form net/http dials (guard.ASCIIHost, the IDNA
//     Lookup profile), lower-cased, without trailing dots, so "Bücher.test."
//     is "xn--bcher-kva.test";
//   - an IP literal in any spelling guard.ParseIPLiteral accepts is the
//     canonical text of the address it means, IPv4-mapped IPv6 unmapped, so
//     "127.0.0.1", "2130706433", "127.1", "0x7f.1", "１２７。０。０。１" and
//     "::ffff:127.0.0.1" are all "127.0.0.1", and an IPv6 zone is dropped
//     (spacing is per address, whichever interface reaches it);
//   - a name with no ASCII form is returned lower-cased and without
//     trailing dots, otherwise as it is.
//
// HostKey("") is "". HostKey is idempotent, so a key may pass through it
// again, as it does in every pacer and Table method.
func HostKey(host string) string {
	name, err := guard.ASCIIHost(host)
	if err != nil {
		// Lower-casing may make a name with no ASCII form one with it
		// ("Ӏ" to "ӏ"): take that form, so the key passes through again
		// unchanged.
		name = strings.TrimRight(strings.ToLower(host), ".")
		if ascii, err := guard.ASCIIHost(name); err == nil {
			name = ascii
		}
	}
	key := strings.TrimRight(strings.ToLower(name), ".")
	if a, ok := guard.ParseIPLiteral(key); ok {
		return canonicalAddr(a)
	}
	return key
}

// canonicalAddr is the text of a literal's key: IPv4-mapped addresses as
// the IPv4 they carry (the guard judges and dials them so), without a zone.
func canonicalAddr(a netip.Addr) string {
	return a.WithZone("").Unmap().String()
}
