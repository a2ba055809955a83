package main

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

// RFC 5425's MSG-LEN (spec §15): what is a length, and what loses the framing.
func TestReadOctetLength(t *testing.T) {
	for input, want := range map[string]int{"5 x": 5, "1234 x": 1234, "1048576 x": 1 << 20} {
		got, err := readOctetLength(bufio.NewReader(strings.NewReader(input)))
		if err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", input, got, err, want)
		}
	}
	for _, input := range []string{"0 x", "05 x", "18446744073709551617 x", "<14>1 x\n", "5x", " 5 x", "1048577 x"} {
		if _, err := readOctetLength(bufio.NewReader(strings.NewReader(input))); !errors.Is(err, errBadLength) {
			t.Errorf("%q: %v, want errBadLength", input, err)
		}
	}
}
