// Package clienttests proves fetch.Transport inside real HTTP client
// libraries (a crawler, a retrying client) against loopback origins. It
// is a module of its own so that those libraries never enter the
// library's requirements.
package clienttests
