package clienthook

import (
	"errors"
	"sync/atomic"
)

// Config is what cmd/workq needs of the root's workq.Config to declare its
// flags from it: the defaults a zero field takes, and the validation of a
// whole Config without a pool. Every value typed any is a workq.Config.
// With these the CLI restates no default and no bound: each setting has
// one default and one validation, the library's.
type Config struct {
	// Defaults returns a workq.Config with every field that has a default
	// set to it.
	Defaults func() any
	// Validate returns every problem NewClient reports for cfg, and those
	// each enqueue would report of its item defaults (MaxAttempts,
	// MaxPayloadBytes), each a *workqtype.ValidationError naming the
	// workq.Config field.
	Validate func(cfg any) error
}

var config atomic.Pointer[Config]

// RegisterConfig sets the Config hooks; the first one registered stays
// (there is only one: the root package's, registered when it is loaded,
// since the CLI declares its flags before any Client exists).
func RegisterConfig(c Config) { config.CompareAndSwap(nil, &c) }

var errNoConfig = errors.New("clienthook: the workq package is not loaded")

// DefaultConfig calls the registered Config.Defaults.
func DefaultConfig() (any, error) {
	c := config.Load()
	if c == nil {
		return nil, errNoConfig
	}
	return c.Defaults(), nil
}

// ValidateConfig calls the registered Config.Validate.
func ValidateConfig(cfg any) error {
	c := config.Load()
	if c == nil {
		return errNoConfig
	}
	return c.Validate(cfg)
}
