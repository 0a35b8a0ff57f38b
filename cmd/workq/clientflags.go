package main

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/workqtype"
)

// clientSetting is one setting of workq.Config the CLI exposes: its flag,
// its environment variable, its help, and the workq.Config fields it sets.
// Its default is the library's (libraryDefaults), its validation the
// library's (workq.Config.Validate): the CLI restates neither. The
// value is held in the CLI's flat config.Config (field cli), where every
// command reads it.
type clientSetting struct {
	flag, env string
	cli       string   // the config.Config field the flag fills
	lib       []string // the workq.Config fields it sets ("Maintenance.X": the maintenance's); the first gives the default
	usage     string
	// none: a duration whose library value "negative" is none; the flag
	// also takes "none", and shows a none default as "none".
	none bool
	// zeroIsNone keeps the CLI's old spelling of none, 0, for the settings
	// whose help said "0 = none" before the CLI took the library's
	// convention (docs/design.md §28, "One configuration").
	zeroIsNone bool
	// zeroOK: the setting's zero value is a value of its own ("" = off,
	// false), not the library's "take the default".
	zeroOK bool
	// invert: a bool whose workq.Config field says the opposite
	// (--reclaim is NoReclaim's negation).
	invert bool
}

// clientSettings are the workq.Config settings of the CLI (the worker's,
// the maintenance's, the Client's item defaults), in `workq config`'s
// order. A new workq.Config setting the CLI exposes is one row here.
var clientSettings = []clientSetting{
	{flag: "schema", env: "WORKQ_SCHEMA", cli: "Schema", lib: []string{"Schema"},
		usage: "PostgreSQL schema of workq's tables, functions, version table and NOTIFY channels (every process of one installation uses the same)"},
	{flag: "worker-id", env: "WORKQ_WORKER_ID", cli: "WorkerID", lib: []string{"ID"},
		usage: "worker identity recorded on claims and runs"},
	{flag: "queues", env: "WORKQ_QUEUES", cli: "Queues", lib: []string{"Queues", "OutboxQueues", "InboxQueues", "TimerQueues"},
		usage: "job queues to work, comma-separated"},
	{flag: "concurrency", env: "WORKQ_CONCURRENCY", cli: "Concurrency", lib: []string{"MaxWorkers"},
		usage: "handlers running at once, per queue"},
	{flag: "batch", env: "WORKQ_BATCH", cli: "Batch", lib: []string{"FetchBatch"},
		usage: "most items one claim takes (beyond free slots only what fast handlers start within 20ms)"},
	{flag: "lease", env: "WORKQ_LEASE", cli: "Lease", lib: []string{"LeaseTTL"},
		usage: "lease TTL; heartbeat every lease/3"},
	{flag: "exec-timeout", env: "WORKQ_EXEC_TIMEOUT", cli: "ExecTimeout", lib: []string{"JobTimeout"}, none: true, zeroIsNone: true,
		usage: "hard deadline of one handler run (none or 0: no deadline)"},
	{flag: "poll", env: "WORKQ_POLL", cli: "Poll", lib: []string{"FetchPollInterval"},
		usage: "poll interval when no notification arrives"},
	{flag: "poll-only", env: "WORKQ_POLL_ONLY", cli: "PollOnly", lib: []string{"PollOnly"}, zeroOK: true,
		usage: "never LISTEN (PgBouncer transaction pooling)"},
	{flag: "reclaim", env: "WORKQ_RECLAIM", cli: "Reclaim", lib: []string{"NoReclaim"}, zeroOK: true, invert: true,
		usage: "workers reap their queues' expired leases before claiming (about once a second)"},
	{flag: "notify-debounce", env: "WORKQ_NOTIFY_DEBOUNCE", cli: "NotifyDebounce", lib: []string{"NotifyDebounce"}, none: true,
		usage: "at most one enqueue NOTIFY per queue per this (none: no NOTIFY, workers find new items by polling)"},
	{flag: "flush-interval", env: "WORKQ_FLUSH_INTERVAL", cli: "FlushInterval", lib: []string{"CompletionFlushInterval"},
		usage: "completions are flushed at least this often"},
	{flag: "flush-batch", env: "WORKQ_FLUSH_BATCH", cli: "FlushBatch", lib: []string{"CompletionFlushBatch"},
		usage: "or as soon as this many wait"},
	{flag: "drain-timeout", env: "WORKQ_DRAIN_TIMEOUT", cli: "DrainTimeout", lib: []string{"DrainTimeout"}, none: true, zeroIsNone: true,
		usage: "on shutdown, time for in-flight jobs to finish before release (none or 0: released at once)"},
	{flag: "runs-dir", env: "WORKQ_RUNS_DIR", cli: "RunsDir", lib: []string{"RunsDir"}, zeroOK: true,
		usage: "per-attempt directory DIR/TABLE/ID/RUN_ID with meta.json and attempt.log"},
	{flag: "max-attempts", env: "WORKQ_MAX_ATTEMPTS", cli: "MaxAttempts", lib: []string{"MaxAttempts"},
		usage: "default attempts of a new job (1 + retries)"},
	{flag: "max-payload", env: "WORKQ_MAX_PAYLOAD", cli: "MaxPayload", lib: []string{"MaxPayloadBytes"},
		usage: "most bytes of a job's JSON payload"},
	{flag: "backoff-base", env: "WORKQ_BACKOFF_BASE", cli: "BackoffBase", lib: []string{"BackoffBase"},
		usage: "retry backoff base: random(0, min(base*2^attempt, cap))"},
	{flag: "backoff-cap", env: "WORKQ_BACKOFF_CAP", cli: "BackoffCap", lib: []string{"BackoffCap"},
		usage: "retry backoff cap"},
	{flag: "reap-interval", env: "WORKQ_REAP_INTERVAL", cli: "ReapInterval", lib: []string{"Maintenance.ReapInterval"},
		usage: "reaper period"},
	{flag: "reap-batch", env: "WORKQ_REAP_BATCH", cli: "ReapBatch", lib: []string{"Maintenance.ReapBatch"},
		usage: "most rows one reap statement handles"},
	{flag: "leader-ttl", env: "WORKQ_LEADER_TTL", cli: "LeaderTTL", lib: []string{"Maintenance.LeaderTTL"},
		usage: "maintenance leader lock TTL: a dead leader is replaced within it"},
	{flag: "retain-finished", env: "WORKQ_RETAIN_FINISHED", cli: "RetainFinished", lib: []string{"Maintenance.RetainFinished"}, none: true, zeroIsNone: true,
		usage: "delete done and failed items this long after they finished (none or 0 keeps them)"},
	{flag: "retain-runs", env: "WORKQ_RETAIN_RUNS", cli: "RetainRuns", lib: []string{"Maintenance.RetainRuns", "RunsDirRetention"}, none: true, zeroIsNone: true,
		usage: "delete archived attempts (a whole UTC day at a time, so up to a day later) and the worker its --runs-dir attempt directories this long after they ended (none or 0 keeps them)"},
	{flag: "retention-interval", env: "WORKQ_RETENTION_INTERVAL", cli: "RetentionInterval", lib: []string{"Maintenance.RetentionInterval", "RunsDirPruneInterval"},
		usage: "how often the retention task runs"},
	{flag: "inbox-window", env: "WORKQ_INBOX_WINDOW", cli: "InboxWindow", lib: []string{"Maintenance.InboxWindow"},
		usage: "inbox de-duplication window: processed messages are deleted this long after processing, and a repeat after it counts as new"},
	{flag: "schedule-interval", env: "WORKQ_SCHEDULE_INTERVAL", cli: "ScheduleInterval", lib: []string{"Maintenance.ScheduleInterval"},
		usage: "how often due schedule slots are materialised into job runs"},
	{flag: "vacuum-interval", env: "WORKQ_VACUUM_INTERVAL", cli: "VacuumInterval", lib: []string{"Maintenance.VacuumInterval"}, none: true,
		usage: "how often the work tables' dead tuples are checked, a table with many vacuumed, and the done tables' new BRIN ranges summarized (none: left to autovacuum)"},
}

// libraryDefaults returns workq.Config's defaults (workq.DefaultConfig). A
// variable so a test can change a default the way a library change would.
var libraryDefaults = workq.DefaultConfig

// libField returns the field of c at path ("MaxWorkers",
// "Maintenance.LeaderTTL").
func libField(c *workq.Config, path string) reflect.Value {
	v := reflect.ValueOf(c).Elem()
	for _, name := range strings.Split(path, ".") {
		v = v.FieldByName(name)
	}
	return v
}

func cliField(c *config.Config, name string) reflect.Value {
	return reflect.ValueOf(c).Elem().FieldByName(name)
}

// fromLib sets the config.Config field of s from lib's first field.
func (s clientSetting) fromLib(c *config.Config, lib workq.Config) {
	src, dst := libField(&lib, s.lib[0]), cliField(c, s.cli)
	switch {
	case s.invert:
		dst.SetBool(!src.Bool())
	case src.Kind() == reflect.Map: // Queues: the names
		dst.Set(reflect.ValueOf(slices.Sorted(maps.Keys(src.Interface().(map[string]workq.QueueConfig)))))
	case src.Kind() == reflect.Slice:
		dst.Set(reflect.ValueOf(slices.Clone(src.Interface().([]string))))
	default:
		dst.Set(src.Convert(dst.Type()))
	}
}

// toLib sets the workq.Config fields of s from c.
func (s clientSetting) toLib(lib *workq.Config, c config.Config) {
	src := cliField(&c, s.cli)
	if s.zeroIsNone && src.Int() == 0 { // set in code, not through the flag
		src = reflect.ValueOf(time.Duration(-1))
	}
	for _, path := range s.lib {
		dst := libField(lib, path)
		switch {
		case s.invert:
			dst.SetBool(!src.Bool())
		case dst.Kind() == reflect.Map: // Queues: each with the default settings
			dst.Set(reflect.ValueOf(queueConfigs(src.Interface().([]string))))
		case dst.Kind() == reflect.Slice:
			dst.Set(reflect.ValueOf(slices.Clone(src.Interface().([]string))))
		default:
			dst.Set(src.Convert(dst.Type()))
		}
	}
}

// setting returns s bound to c, for config.Config.Bind.
func (s clientSetting) setting(c *config.Config) config.Setting {
	ptr := cliField(c, s.cli).Addr().Interface()
	if s.none {
		ptr = config.NoneDuration(ptr.(*time.Duration), s.zeroIsNone)
	}
	return config.Setting{Option: config.Option{Flag: s.flag, Env: s.env, Usage: s.usage}, Ptr: ptr}
}

// clientBindings returns every setting of clientSettings bound to c.
func clientBindings(c *config.Config) []config.Setting {
	out := make([]config.Setting, len(clientSettings))
	for i, s := range clientSettings {
		out[i] = s.setting(c)
	}
	return out
}

// withLibraryDefaults sets every clientSettings field of c to the
// library's default.
func withLibraryDefaults(c *config.Config) {
	d := libraryDefaults()
	for _, s := range clientSettings {
		s.fromLib(c, d)
	}
}

// checkClientSettings is the validation of the workq.Config settings of
// cfg (config.Config.Validate runs it, SetCheck): a zero the CLI does not
// pass on (the library reads a zero as "take the default", while a value
// given on the command line is meant), then the library's validation of
// the workq.Config they make, each problem naming its flag.
func checkClientSettings(cfg config.Config) error {
	var errs []error
	d := libraryDefaults()
	for _, s := range clientSettings {
		if v := cliField(&cfg, s.cli); s.zeroOK || !v.IsZero() && (v.Kind() != reflect.Slice || v.Len() > 0) {
			continue
		}
		def := config.Config{}
		s.fromLib(&def, d)
		errs = append(errs, fmt.Errorf("--%s must not be %s (leave it and %s unset for the default, %s%s)",
			s.flag, zeroWord(cliField(&cfg, s.cli)), s.env, showValue(cliField(&def, s.cli)), noneHint(s)))
	}
	// The zeros refused above take the default here, so the library
	// reports the other problems only.
	errs = append(errs, flagErrors(clientConfig(cfg, nil, nil, nil).Validate()))
	return errors.Join(errs...)
}

func zeroWord(v reflect.Value) string {
	if v.Kind() == reflect.String || v.Kind() == reflect.Slice {
		return "empty"
	}
	return "0"
}

func noneHint(s clientSetting) string {
	if s.none {
		return "; " + config.None + " turns it off"
	}
	return ""
}

func showValue(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case []string:
		return strings.Join(x, ",")
	case time.Duration:
		if x < 0 {
			return config.None
		}
	}
	return fmt.Sprint(v.Interface())
}

// flagErrors rewrites the library's validation errors (each naming a
// workq.Config field) as the CLI's: "--FLAG: what is wrong".
func flagErrors(err error) error {
	if err == nil {
		return nil
	}
	var out []error
	var walk func(error)
	walk = func(e error) {
		var ve *workqtype.ValidationError
		if v, ok := e.(*workqtype.ValidationError); ok {
			ve = v
		} else if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		if ve != nil {
			if flag := flagOfField(ve.Field); flag != "" {
				out = append(out, fmt.Errorf("--%s: %s", flag, ve.Msg))
				return
			}
		}
		out = append(out, e)
	}
	walk(err)
	return errors.Join(out...)
}

// flagOfField returns the flag of the workq.Config field name (the last
// element of a path), "" when the CLI has none.
func flagOfField(field string) string {
	for _, s := range clientSettings {
		for _, path := range s.lib {
			if path == field || strings.HasSuffix(path, "."+field) {
				return s.flag
			}
		}
	}
	return ""
}
