package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestNoneDuration: none, NONE and any negative duration are none (held
// negative, shown as none); 0 is none only where zeroIsNone keeps the old
// spelling; anything else is a duration or an error naming none.
func TestNoneDuration(t *testing.T) {
	for _, c := range []struct {
		in         string
		zeroIsNone bool
		want       time.Duration
		show       string
	}{
		{"none", false, -1, "none"}, {" NONE ", false, -1, "none"}, {"-5s", false, -1, "none"},
		{"0", true, -1, "none"}, {"0s", true, -1, "none"}, {"0", false, 0, "0s"}, {"90s", true, 90 * time.Second, "1m30s"},
	} {
		var d time.Duration = 7
		v := NoneDuration(&d, c.zeroIsNone)
		if err := v.Set(c.in); err != nil {
			t.Errorf("Set(%q): %v", c.in, err)
			continue
		}
		if d != c.want || v.String() != c.show {
			t.Errorf("Set(%q) zeroIsNone=%v: %s shown %q, want %s shown %q", c.in, c.zeroIsNone, d, v.String(), c.want, c.show)
		}
	}
	var d time.Duration
	if err := NoneDuration(&d, false).Set("forever"); err == nil || !strings.Contains(err.Error(), "or none") {
		t.Errorf("Set(forever): %v, want an error naming none", err)
	}
}

// TestBindSettings: settings declared outside the package are bound like
// the CLI's own ones, read from the environment (a NoneDuration too), and
// listed by Options after the database settings.
func TestBindSettings(t *testing.T) {
	c := Default()
	t.Setenv("WORKQ_TEST_TIMEOUT", "none")
	t.Setenv("WORKQ_TEST_BATCH", "7")
	s := []Setting{
		{Option: Option{Flag: "test-timeout", Env: "WORKQ_TEST_TIMEOUT", Usage: "u"}, Ptr: NoneDuration(&c.ExecTimeout, false)},
		{Option: Option{Flag: "test-batch", Env: "WORKQ_TEST_BATCH", Usage: "u"}, Ptr: &c.Batch},
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	if err := c.Bind(fs, s, "test-timeout", "test-batch", "database-url"); err != nil {
		t.Fatal(err)
	}
	if c.ExecTimeout >= 0 || c.Batch != 7 {
		t.Errorf("from the environment: ExecTimeout %s, Batch %d; want none, 7", c.ExecTimeout, c.Batch)
	}
	if f := fs.Lookup("test-timeout"); f == nil || f.DefValue != "none" {
		t.Errorf("--test-timeout: %+v, want default none", f)
	}
	if err := fs.Parse([]string{"--test-timeout", "3s"}); err != nil || c.ExecTimeout != 3*time.Second {
		t.Errorf("--test-timeout 3s: %v, %s", err, c.ExecTimeout)
	}
	var flags []string
	for _, o := range c.Options(s) {
		flags = append(flags, o.Flag)
	}
	if got := strings.Join(flags[:4], ","); got != "database-url,max-conns,test-timeout,test-batch" {
		t.Errorf("Options order %s", got)
	}
}

// TestValidateRunsTheCheck: Validate reports the check SetCheck set (the
// library's validation of workq.Config's settings) with the CLI's own
// problems.
func TestValidateRunsTheCheck(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	c.MaxConns = 1
	c.SetCheck(func(Config) error { return errors.New("library says no") })
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "max-conns must be at least 2") || !strings.Contains(err.Error(), "library says no") {
		t.Errorf("Validate: %v, want the CLI's and the check's problems", err)
	}
}
