package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/worker"
)

// TestConfigDefaultsAreTheComponents: every default the CLI's flags show
// is the owning component's (the worker runtime's, the maintenance's),
// written once there, and clientConfig maps the flags onto workq.Config
// fields with the CLI's "0 means none" as the library's negative.
func TestConfigDefaultsAreTheComponents(t *testing.T) {
	cfg := config.Default()
	c := clientConfig(cfg, nil, nil, nil)
	w, m := worker.DefaultConfig(), workq.DefaultMaintenance()
	for _, d := range []struct {
		name      string
		cli, comp any
	}{
		{"concurrency", c.MaxWorkers, w.Concurrency},
		{"batch", c.FetchBatch, w.Batch},
		{"poll", c.FetchPollInterval, w.Poll},
		{"lease", c.LeaseTTL, w.Lease},
		{"exec-timeout", c.JobTimeout, w.ExecTimeout},
		{"drain-timeout", c.DrainTimeout, w.DrainTimeout},
		{"backoff-base", c.BackoffBase, w.BackoffBase},
		{"backoff-cap", c.BackoffCap, w.BackoffCap},
		{"flush-interval", c.CompletionFlushInterval, w.FlushInterval},
		{"flush-batch", c.CompletionFlushBatch, w.FlushBatch},
		{"retain-runs (runs dir)", c.RunsDirRetention, w.RetainRuns},
		{"leader-ttl", c.Maintenance.LeaderTTL, m.LeaderTTL},
		{"reap-interval", c.Maintenance.ReapInterval, m.ReapInterval},
		{"reap-batch", c.Maintenance.ReapBatch, m.ReapBatch},
		{"retain-finished", c.Maintenance.RetainFinished, m.RetainFinished},
		{"retain-runs", c.Maintenance.RetainRuns, m.RetainRuns},
		{"retention-interval", c.Maintenance.RetentionInterval, m.RetentionInterval},
		{"inbox-window", c.Maintenance.InboxWindow, m.InboxWindow},
		{"schedule-interval", c.Maintenance.ScheduleInterval, m.ScheduleInterval},
		{"vacuum-interval", c.Maintenance.VacuumInterval, m.VacuumInterval},
	} {
		if d.cli != d.comp {
			t.Errorf("--%s defaults to %v in the CLI, %v in its component", d.name, d.cli, d.comp)
		}
	}
	if len(c.Queues) != 1 || c.Queues["default"] != (workq.QueueConfig{}) {
		t.Errorf("--queues default: Config.Queues %v, want the queue default", c.Queues)
	}
	// The CLI's 0 (none) is the library's negative (none).
	cfg.ExecTimeout, cfg.DrainTimeout, cfg.RetainRuns, cfg.RetainFinished = 0, 0, 0, 0
	c = clientConfig(cfg, nil, nil, nil)
	for name, v := range map[string]time.Duration{"exec-timeout": c.JobTimeout, "drain-timeout": c.DrainTimeout,
		"retain-runs": c.RunsDirRetention, "retain-finished": c.Maintenance.RetainFinished} {
		if v >= 0 {
			t.Errorf("--%s 0 (none) maps to %s, want negative (none)", name, v)
		}
	}
}

// TestClientSettingsAreWorkqConfigFields: every row of clientSettings names
// a config.Config field and workq.Config fields of the same kind, and the
// library's defaults of a row's fields agree (retain-runs is the
// maintenance's and the runs directory's, retention-interval too).
func TestClientSettingsAreWorkqConfigFields(t *testing.T) {
	d := libraryDefaults()
	seen := map[string]bool{}
	for _, s := range clientSettings {
		if seen[s.flag] {
			t.Errorf("--%s: two rows", s.flag)
		}
		seen[s.flag] = true
		var c config.Config
		if !cliField(&c, s.cli).IsValid() {
			t.Errorf("--%s: config.Config has no field %s", s.flag, s.cli)
			continue
		}
		for _, path := range s.lib {
			if !libField(&d, path).IsValid() {
				t.Errorf("--%s: workq.Config has no field %s", s.flag, path)
			}
		}
		if s.none && cliField(&c, s.cli).Type() != reflect.TypeOf(time.Duration(0)) {
			t.Errorf("--%s: none is for durations", s.flag)
		}
		// The row's default, mapped back onto every field it sets, is
		// each field's library default.
		s.fromLib(&c, d)
		var back workq.Config
		s.toLib(&back, c)
		for _, path := range s.lib {
			if got, want := libField(&back, path).Interface(), libField(&d, path).Interface(); !reflect.DeepEqual(got, want) {
				t.Errorf("--%s: default %v for %s, the library's is %v", s.flag, got, path, want)
			}
		}
	}
}

// notInCLI are workq.Config's fields the CLI has no flag for: Go values
// (handlers, hooks, observers) or settings of embedding code.
var notInCLI = map[string]string{
	"Logger": "log-level and log-format make it", "Workers": "built-in handlers", "Relay": "Go options",
	"MetricsRegisterer": "metrics-addr makes it", "TracerProvider": "otel-* make it",
	"SkipUnknownKindCheck": "Go", "RetryPolicy": "Go", "EnqueueMiddleware": "Go", "WorkMiddleware": "Go",
	"Sharding": "the sharded commands' own flags", "PeriodicJobs": "workq schedules", "FlowLimits": "workq flow set", "Maintenance.Disabled": "by command",
	"TimerNotifyWithin": "follows --poll (its default, FetchPollInterval)",
}

// TestEveryWorkqConfigSettingHasARow: a setting added to workq.Config (or
// its MaintenanceConfig) gets a row in clientSettings, or a reason here
// why the CLI has none.
func TestEveryWorkqConfigSettingHasARow(t *testing.T) {
	inTable := map[string]bool{}
	for _, s := range clientSettings {
		for _, p := range s.lib {
			inTable[p] = true
		}
	}
	check := func(prefix string, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name := prefix + f.Name
			if !f.IsExported() || f.Type == reflect.TypeOf(workq.MaintenanceConfig{}) {
				continue
			}
			if !inTable[name] && notInCLI[name] == "" {
				t.Errorf("workq.Config's %s has no row in clientSettings (nor a reason in notInCLI)", name)
			}
		}
	}
	check("", reflect.TypeOf(workq.Config{}))
	check("Maintenance.", reflect.TypeOf(workq.MaintenanceConfig{}))
}

// TestCLIShowsTheLibrarysDefaults: a default changed in the library is
// the CLI's default, in `workq config`, in --help and in the Client the
// CLI makes, without a change to the CLI (libraryDefaults stands in for a
// library whose defaults changed).
func TestCLIShowsTheLibrarysDefaults(t *testing.T) {
	isolateEnv(t)
	real := libraryDefaults
	t.Cleanup(func() { libraryDefaults = real })
	libraryDefaults = func() workq.Config {
		d := real()
		d.MaxWorkers = 123
		d.JobTimeout = -1 // none
		d.Maintenance.LeaderTTL = 42 * time.Second
		d.RunsDirRetention, d.Maintenance.RetainRuns = 48*time.Hour, 48*time.Hour
		return d
	}
	out, err := runCLI(t, "config")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| `--concurrency` | `WORKQ_CONCURRENCY` | `123` |", "| `--exec-timeout` | `WORKQ_EXEC_TIMEOUT` | `none` |",
		"| `--leader-ttl` | `WORKQ_LEADER_TTL` | `42s` |", "| `--retain-runs` | `WORKQ_RETAIN_RUNS` | `48h0m0s` |"} {
		if !strings.Contains(out, want) {
			t.Errorf("workq config does not show the library's default: no %q in\n%s", want, out)
		}
	}
	help, err := runCLI(t, "worker", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(default 123)", "no deadline) (default none)"} {
		if !strings.Contains(help, want) {
			t.Errorf("workq worker --help: no %q in\n%s", want, help)
		}
	}
	c := clientConfig(cliConfig(), nil, nil, nil)
	if c.MaxWorkers != 123 || c.JobTimeout >= 0 || c.Maintenance.LeaderTTL != 42*time.Second || c.RunsDirRetention != 48*time.Hour {
		t.Errorf("the CLI's Client config %+v does not take the library's defaults", c)
	}
	// Every default of a row is the library's: the CLI's defaults make
	// the library's Config.
	libraryDefaults = real
	if got, want := clientConfig(cliConfig(), nil, nil, nil), real(); !reflect.DeepEqual(got, want) {
		t.Errorf("the CLI's defaults make\n%+v\nthe library's are\n%+v", got, want)
	}
}

// TestNoneSpellings: a duration whose library value "negative" is none
// takes "none" and any negative duration, from a flag or the environment;
// the CLI's old 0 still means none where its help said so (exec-timeout,
// drain-timeout, retain-finished, retain-runs), and is refused elsewhere
// (the library would read it as its default).
func TestNoneSpellings(t *testing.T) {
	isolateEnv(t)
	parse := func(t *testing.T, env map[string]string, args ...string) (workq.Config, error) {
		t.Helper()
		for k, v := range env {
			t.Setenv(k, v)
		}
		cmd := &cobra.Command{Use: "t"}
		cmd.SetArgs(args)
		cfg := bindConfig(cmd, "exec-timeout", "drain-timeout", "retain-finished", "retain-runs", "notify-debounce", "lease")
		if err := cmd.ParseFlags(args); err != nil {
			return workq.Config{}, err
		}
		if err := cfg.Validate(); err != nil {
			return workq.Config{}, err
		}
		return clientConfig(*cfg, nil, nil, nil), nil
	}
	none := func(t *testing.T, c workq.Config, fields ...string) {
		t.Helper()
		for _, f := range fields {
			if v := libField(&c, f).Interface().(time.Duration); v >= 0 {
				t.Errorf("%s = %s, want negative (none)", f, v)
			}
		}
	}
	for _, v := range []string{"none", "NONE", "-1s", "0", "0s"} {
		t.Run("flags "+v, func(t *testing.T) {
			c, err := parse(t, nil, "--exec-timeout", v, "--drain-timeout", v, "--retain-finished", v, "--retain-runs", v)
			if err != nil {
				t.Fatal(err)
			}
			none(t, c, "JobTimeout", "DrainTimeout", "Maintenance.RetainFinished", "Maintenance.RetainRuns", "RunsDirRetention")
		})
		t.Run("environment "+v, func(t *testing.T) {
			c, err := parse(t, map[string]string{"WORKQ_EXEC_TIMEOUT": v, "WORKQ_RETAIN_FINISHED": v, "WORKQ_RETAIN_RUNS": v})
			if err != nil {
				t.Fatal(err)
			}
			none(t, c, "JobTimeout", "Maintenance.RetainFinished", "Maintenance.RetainRuns", "RunsDirRetention")
		})
	}
	c, err := parse(t, nil, "--notify-debounce", "none", "--exec-timeout", "90s")
	if err != nil {
		t.Fatal(err)
	}
	none(t, c, "NotifyDebounce")
	if c.JobTimeout != 90*time.Second {
		t.Errorf("--exec-timeout 90s: JobTimeout %s", c.JobTimeout)
	}
	// notify-debounce never said 0 = none: a 0 is refused, not read as
	// the library's default.
	if _, err := parse(t, nil, "--notify-debounce", "0"); err == nil || !strings.Contains(err.Error(), "--notify-debounce must not be 0") ||
		!strings.Contains(err.Error(), "none turns it off") {
		t.Errorf("--notify-debounce 0: %v, want refused, naming none", err)
	}
	if _, err := parse(t, nil, "--lease", "none"); err == nil {
		t.Errorf("--lease none: accepted, but lease has no none")
	}
	// A none default is shown as none.
	cmd := &cobra.Command{Use: "t"}
	cfg := bindConfig(cmd, "retain-finished")
	cfg.RetainFinished = -1
	for _, s := range clientBindings(cfg) {
		if s.Flag == "retain-finished" {
			if got := s.Ptr.(pflag.Value).String(); got != "none" {
				t.Errorf("retain-finished none shows as %q", got)
			}
		}
	}
}
