package main

import (
	"strconv"
	"sync/atomic"
)

// seenSet counts how often each sequence number was consumed; consumers
// call mark concurrently.
type seenSet struct {
	count []atomic.Uint32
}

func newSeenSet(n int) *seenSet { return &seenSet{count: make([]atomic.Uint32, n)} }

func (s *seenSet) mark(i int) {
	if i >= 0 && i < len(s.count) {
		s.count[i].Add(1)
	}
}

// check returns how many sequence numbers were never seen and how many were
// seen more than once.
func (s *seenSet) check() (missing, duplicates int) {
	for i := range s.count {
		switch c := s.count[i].Load(); {
		case c == 0:
			missing++
		case c > 1:
			duplicates++
		}
	}
	return missing, duplicates
}

// body is the payload of message i: a small JSON object, as a no-op job's.
func body(i int) []byte {
	b := make([]byte, 0, 16)
	b = append(b, `{"i":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	return append(b, '}')
}

// seq reads the sequence number back from a body; -1 if it is not one.
func seq(b []byte) int {
	if len(b) < 7 || string(b[:5]) != `{"i":` || b[len(b)-1] != '}' {
		return -1
	}
	i, err := strconv.Atoi(string(b[5 : len(b)-1]))
	if err != nil {
		return -1
	}
	return i
}
