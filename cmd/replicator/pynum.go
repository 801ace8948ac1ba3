package main

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// The reference reads its numeric settings with pydantic, whose text
// forms are not Go's: an env file that boots it must boot this worker, so
// numbers are read as pydantic reads them (the caller has already trimmed
// the surrounding white space, as pydantic does for numbers).

// pyIntSyntax is what pydantic takes for an int from text: an optional
// sign, ASCII digits with single underscores between them (PEP 515), and
// an optional fraction of zeros only ("5.0"). Not "5.", "1e3", "0x10" or
// other scripts' digits.
var pyIntSyntax = regexp.MustCompile(`^[+-]?[0-9](_?[0-9])*(\.0+)?$`)

// pyFloatSyntax is what Rust's f64 parser, which pydantic uses, takes: an
// optional sign, then inf, infinity or nan in any case, or digits with an
// optional point and exponent ("1e3", ".5", "5.").
var pyFloatSyntax = regexp.MustCompile(`^[+-]?((?i:inf|infinity|nan)|([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?)$`)

// errNotInt and errNotFloat say what pyInt and pyFloat refused.
var (
	errNotInt   = errors.New("not a whole number")
	errNotFloat = errors.New("not a number")
	errIntRange = errors.New("out of range")
)

// pyInt parses v as pydantic parses an int setting. A whole number beyond
// int64, which pydantic would take, is errIntRange.
func pyInt(v string) (int64, error) {
	if !pyIntSyntax.MatchString(v) {
		return 0, errNotInt
	}
	if i := strings.IndexByte(v, '.'); i >= 0 {
		v = v[:i]
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(strings.TrimPrefix(v, "+"), "_", ""), 10, 64)
	if err != nil {
		return 0, errIntRange
	}
	return n, nil
}

// pyFloat parses v as pydantic parses a float setting. Underscores are
// taken between digits, as pydantic strips them; NaN and the infinities
// parse, for the caller to judge.
func pyFloat(v string) (float64, error) {
	if strings.Contains(v, "_") {
		if strings.HasPrefix(v, "_") || strings.HasSuffix(v, "_") || strings.Contains(v, "__") {
			return 0, errNotFloat
		}
		v = strings.ReplaceAll(v, "_", "")
	}
	if !pyFloatSyntax.MatchString(v) {
		return 0, errNotFloat
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil && !math.IsInf(f, 0) { // 1e400 is +Inf to Rust as to Go
		return 0, errNotFloat
	}
	return f, nil
}

// pyBool reads a boolean as pydantic does: the words it accepts, in any
// case.
func pyBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "on", "t", "true", "y", "yes":
		return true, nil
	case "0", "off", "f", "false", "n", "no":
		return false, nil
	}
	return false, errors.New("not a boolean")
}
