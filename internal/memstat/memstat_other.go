//go:build !linux

package memstat

func available() (uint64, bool) { return 0, false }

func (s *Sampler) sample() map[string]uint64 { return nil }
