package main

import "testing"

func TestWatchCursor(t *testing.T) {
	for id, want := range map[string]string{
		"1796536848629-3": "1796536847629-0", // a second before
		"1796536848629":   "1796536847629-0",
		"999-0":           "0-0",
		"0-0":             "0-0",
		"not-an-id":       "0-0",
	} {
		if got := watchCursor(id); got != want {
			t.Errorf("watchCursor(%q) = %q, want %q", id, got, want)
		}
	}
}
