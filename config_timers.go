package workq

import (
	"errors"

	"github.com/workq/workq/internal/timersrt"
	"github.com/workq/workq/workqtype"
)

// timerOptions are the timers runtime's options of cfg. Its one default
// of TimerNotifyWithin is the workers' poll interval: this Client's
// FetchPollInterval when set, else the runtime's (the default poll).
func (cfg Config) timerOptions() timersrt.ClientOptions {
	o := timersrt.ClientOptions{MaxAttempts: cfg.MaxAttempts, NotifyDebounce: cfg.NotifyDebounce,
		MaxPayloadBytes: cfg.MaxPayloadBytes, NotifyWithin: cfg.TimerNotifyWithin}
	if o.NotifyWithin == 0 {
		o.NotifyWithin = cfg.FetchPollInterval // 0: the runtime's default
	}
	return o
}

// validateTimers is the timers runtime's validation of o, its errors
// naming Config's field.
func validateTimers(o timersrt.ClientOptions) error {
	err := o.Validate()
	var ve *workqtype.ValidationError
	if errors.As(err, &ve) && ve.Field == "NotifyWithin" {
		c := *ve
		c.Field = "TimerNotifyWithin"
		return &c
	}
	return err
}
