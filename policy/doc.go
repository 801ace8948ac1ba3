// Package policy decides how often each origin may be asked: per-host floors
// from content.fetch-policy, minimum spacing between requests, and escalation
// when an origin answers 429 or 503.
package policy
