package workq

import (
	"errors"
	"reflect"
	"testing"

	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/workqtype"
)

// TestDefaultConfigIsTheRuntimes: the defaults the CLI reads
// (DefaultConfig) are what NewClient makes of
// a zero Config: mapped to the runtime they are the runtime's own
// defaults, and the maintenance's are DefaultMaintenance.
func TestDefaultConfigIsTheRuntimes(t *testing.T) {
	d := DefaultConfig()
	if got, want := d.workerConfig(), worker.DefaultConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("defaultConfig mapped to the runtime:\n got %+v\nwant %+v", got, want)
	}
	if got, want := (Config{}).workerConfig().WithDefaults(), d.workerConfig().WithDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("a zero Config runs with %+v, defaultConfig with %+v", got, want)
	}
	if d.Maintenance != DefaultMaintenance() {
		t.Errorf("defaultConfig's maintenance %+v, want DefaultMaintenance %+v", d.Maintenance, DefaultMaintenance())
	}
	if err := d.Validate(); err != nil {
		t.Errorf("defaultConfig does not validate: %v", err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("a zero Config does not validate: %v", err)
	}
}

// TestConfigValidateNamesFields: validate reports every problem, each a
// ValidationError naming Config's field (the CLI maps it to its flag),
// including the item defaults NewClient leaves to each enqueue.
func TestConfigValidateNamesFields(t *testing.T) {
	cfg := Config{Schema: "public", MaxWorkers: 20000, LeaseTTL: 10e6, MaxAttempts: 5000, MaxPayloadBytes: -1,
		Maintenance: MaintenanceConfig{LeaderTTL: 100e6}}
	err := cfg.Validate()
	if !errors.Is(err, workqtype.ErrInvalid) {
		t.Fatalf("validate: %v, want ErrInvalid", err)
	}
	var fields []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok && !isValidation(e) { // a join
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		fields = append(fields, workqtype.FieldOf(e))
	}
	walk(err)
	want := []string{"Schema", "MaxWorkers", "LeaseTTL", "LeaderTTL", "MaxAttempts", "MaxPayloadBytes"}
	if !reflect.DeepEqual(fields, want) {
		t.Errorf("fields %v, want %v (%v)", fields, want, err)
	}
}

func isValidation(err error) bool {
	_, ok := err.(*workqtype.ValidationError)
	return ok
}
