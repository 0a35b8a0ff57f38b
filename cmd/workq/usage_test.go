package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

// TestCLIExitCodesAndMessages runs the real binary: what each usage error
// prints (one line on stderr, naming the command and what is wrong) and its
// exit code, and what a few commands print on success.
func TestCLIExitCodesAndMessages(t *testing.T) {
	isolateEnv(t)
	bin := testutil.BuildWorkq(t, "../..")
	migrated := testdb.URL(t)
	empty := emptyDatabase(t)
	cases := []struct {
		name   string
		args   []string
		dbURL  string
		code   int
		stderr string // the whole of stderr (one line) when set
		has    []string
		hasNot []string
		stdout []string // substrings of stdout
	}{
		{name: "unknown subcommand", args: []string{"jobs", "frob"}, code: 1,
			stderr: `workq jobs: unknown subcommand "frob"; run 'workq jobs --help' for the list`},
		{name: "unknown subcommand close to one", args: []string{"jobs", "shwo"}, code: 1,
			stderr: `workq jobs: unknown subcommand "shwo" (did you mean "show"?); run 'workq jobs --help' for the list`},
		{name: "unknown command in capitals", args: []string{"Enqueue"}, code: 1,
			stderr: `workq: unknown command "Enqueue" (did you mean "enqueue"?); run 'workq --help' for the list`},
		{name: "unknown command with a typo", args: []string{"lmit"}, code: 1,
			stderr: `workq: unknown command "lmit" (did you mean "limit"?); run 'workq --help' for the list`},
		// Not "frob": it is two edits from "flow", which is suggested.
		{name: "help on an unknown command", args: []string{"help", "xyzzy"}, code: 1,
			stderr: `workq help: unknown command "xyzzy"; run 'workq --help' for the list`},
		{name: "help on an unknown subcommand", args: []string{"help", "jobs", "frob"}, code: 1,
			stderr: `workq help: unknown subcommand "frob"; run 'workq jobs --help' for the list`},
		{name: "completion for an unknown shell", args: []string{"completion", "frob"}, code: 1,
			stderr: `workq completion: unknown subcommand "frob"; run 'workq completion --help' for the list`},
		{name: "help on a command", args: []string{"help", "jobs", "show"}, code: 0, stdout: []string{"workq jobs show ID"}},
		{name: "group without a subcommand prints its help", args: []string{"jobs"}, code: 0, stdout: []string{"Available Commands:", "list"}},
		{name: "priority out of range", args: []string{"enqueue", "--kind", "k", "--priority", "99999999999"}, code: 1,
			stderr: `workq enqueue: --priority "99999999999": want a whole number from -32768 to 32767`},
		{name: "priority not a number", args: []string{"enqueue", "--kind", "k", "--priority", "high"}, code: 1,
			stderr: `workq enqueue: --priority "high": want a whole number from -32768 to 32767`},
		{name: "duration flag", args: []string{"enqueue", "--kind", "k", "--delay", "soon"}, code: 1,
			stderr: `workq enqueue: --delay "soon": want a duration such as 500ms, 30s, 5m or 1h30m`},
		{name: "int32 flag", args: []string{"worker", "--max-conns", "many"}, code: 1,
			stderr: `workq worker: --max-conns "many": want a whole number from -2147483648 to 2147483647`},
		{name: "unknown flag", args: []string{"enqueue", "--frob"}, code: 1,
			stderr: `workq enqueue: unknown flag: --frob (see 'workq enqueue --help')`},
		{name: "missing argument named", args: []string{"queue", "pause", "job_runs"}, code: 1,
			stderr: `workq queue pause: missing QUEUE (usage: workq queue pause TABLE QUEUE)`},
		{name: "missing first argument named", args: []string{"jobs", "show"}, code: 1,
			stderr: `workq jobs show: missing ID (usage: workq jobs show ID [--json])`},
		{name: "extra argument", args: []string{"stats", "now"}, code: 1,
			stderr: `workq stats: unexpected argument "now" (usage: workq stats)`},
		{name: "extra argument after the named ones", args: []string{"queue", "resume", "job_runs", "q", "r"}, code: 1,
			stderr: `workq queue resume: unexpected argument "r" (usage: workq queue resume TABLE QUEUE)`},
		{name: "missing migrate action", args: []string{"migrate"}, code: 1,
			stderr: `workq migrate: missing argument (usage: workq migrate up|down|status|version|sql)`},
		{name: "prefix not doubled", args: []string{"worker", "--inbox"}, code: 1,
			has: []string{"workq worker: --inbox and --timers need handlers"}, hasNot: []string{"workq: workq", "worker: workq worker"}},
		{name: "worker on an empty database", args: []string{"worker"}, dbURL: empty, code: 1,
			has: []string{"workq worker: schema \"workq\" is not migrated: run `workq migrate up`"}, hasNot: []string{"workq worker: workq:"}},
		{name: "limit set says what it set", args: []string{"limit", "set", "job_runs", "q", "3"}, dbURL: migrated, code: 0,
			stdout: []string{"job_runs/q: limit W = 3 (at most 3 items in progress at once, across every worker)"}},
		{name: "limit set 0", args: []string{"limit", "set", "job_runs", "q", "0"}, dbURL: migrated, code: 0,
			stdout: []string{"job_runs/q: limit W = 0 (no item is claimed until it is raised or removed)"}},
		{name: "limit remove says so", args: []string{"limit", "remove", "job_runs", "q"}, dbURL: migrated, code: 0,
			stdout: []string{"job_runs/q: limit removed"}},
		{name: "limit set --json", args: []string{"limit", "set", "job_runs", "q", "5", "--json"}, dbURL: migrated, code: 0,
			stdout: []string{`"max_in_progress": 5`, `"table": "job_runs"`}},
		{name: "version", args: []string{"version"}, code: 0, stdout: []string{"workq ", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH}},
		{name: "--version", args: []string{"--version"}, code: 0, stdout: []string{"workq ", runtime.Version()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runBinary(t, bin, tc.dbURL, tc.args...)
			if code != tc.code {
				t.Errorf("workq %q exited %d, want %d (stderr %q)", tc.args, code, tc.code, stderr)
			}
			if tc.code != 0 {
				if n := strings.Count(stderr, "\n"); n != 1 || strings.Contains(stderr, "\t") {
					t.Errorf("stderr %q: want one line without tabs", stderr)
				}
			}
			if tc.stderr != "" && strings.TrimSuffix(stderr, "\n") != tc.stderr {
				t.Errorf("stderr\n %q\nwant\n %q", stderr, tc.stderr)
			}
			for _, s := range tc.has {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr %q lacks %q", stderr, s)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(stderr, s) {
					t.Errorf("stderr %q has %q", stderr, s)
				}
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout %q lacks %q", stdout, s)
				}
			}
		})
	}

	t.Run("version --json", func(t *testing.T) {
		stdout, stderr, code := runBinary(t, bin, "", "version", "--json")
		var v versionInfo
		if err := json.Unmarshal([]byte(stdout), &v); code != 0 || err != nil {
			t.Fatalf("exit %d, stdout %q (%v), stderr %q", code, stdout, err, stderr)
		}
		if v.Version == "" || v.Go != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH {
			t.Errorf("version %+v; want a version, %s and %s/%s", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		}
		// go build stamps the commit when it finds the checkout's .git
		// directory (not in a git worktree, whose .git is a file): when it
		// did, it is this checkout's HEAD.
		if v.Revision != "" {
			rev, err := exec.Command("git", "rev-parse", "HEAD").Output()
			if want := strings.TrimSpace(string(rev)); err != nil || v.Revision != want || v.Time == "" {
				t.Errorf("revision %q at %q; want %s (%v) and its time", v.Revision, v.Time, want, err)
			}
		} else {
			t.Logf("the binary carries no VCS stamp (built outside a git checkout, or in a worktree)")
		}
	})
}

// runBinary runs bin with args, DATABASE_URL set to dbURL (unset when
// empty), and returns its output and exit code (-1 when killed after a
// minute).
func runBinary(t *testing.T, bin, dbURL string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	// A command that should exit but loops (a worker retrying a missing
	// schema) fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = os.Environ()
	if dbURL != "" {
		cmd.Env = append(cmd.Env, "DATABASE_URL="+dbURL)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("run workq %q: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// The version line and JSON carry what the build info holds: the module
// version, and the commit, its time and whether the checkout was modified
// when go build stamped them.
func TestVersionFromBuildInfo(t *testing.T) {
	checkout := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2030-01-02T15:04:05Z"}}}
	cases := []struct {
		name    string
		bi      *debug.BuildInfo
		stamped string
		line    string
		json    string
	}{
		{name: "no build info", bi: nil, line: "workq unknown",
			json: `{"version":"unknown","go":"GO","platform":"PLATFORM"}`},
		{name: "tagged module", bi: &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, line: "workq v1.4.0",
			json: `{"version":"v1.4.0","go":"GO","platform":"PLATFORM"}`},
		{name: "checkout", bi: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2030-01-02T15:04:05Z"}, {Key: "vcs.modified", Value: "true"}}},
			line: "workq (devel) (0123456789ab, 2030-01-02T15:04:05Z, modified)",
			json: `{"version":"(devel)","revision":"0123456789abcdef0123456789abcdef01234567","revision_time":"2030-01-02T15:04:05Z","modified":true,"go":"GO","platform":"PLATFORM"}`},
		{name: "checkout built by make", bi: checkout, stamped: "v0.0.0-dev+0123456789ab", line: "workq v0.0.0-dev+0123456789ab (0123456789ab, 2030-01-02T15:04:05Z)",
			json: `{"version":"v0.0.0-dev+0123456789ab","revision":"0123456789abcdef0123456789abcdef01234567","revision_time":"2030-01-02T15:04:05Z","go":"GO","platform":"PLATFORM"}`},
		{name: "go build's pseudo-version of a checkout", bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20301231235959-0123456789ab+dirty"}},
			line: "workq v0.0.0-20301231235959-0123456789ab+dirty",
			json: `{"version":"v0.0.0-20301231235959-0123456789ab+dirty","go":"GO","platform":"PLATFORM"}`},
		{name: "make's stamp wins over go build's pseudo-version", bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20301231235959-0123456789ab+dirty"}},
			stamped: "v1.3.0-2-gabc", line: "workq v1.3.0-2-gabc",
			json: `{"version":"v1.3.0-2-gabc","go":"GO","platform":"PLATFORM"}`},
		{name: "stamp without build info", stamped: "v1.4.0", line: "workq v1.4.0",
			json: `{"version":"v1.4.0","go":"GO","platform":"PLATFORM"}`},
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := versionFrom(tc.bi, tc.stamped)
			if want := tc.line + " " + runtime.Version() + " " + platform; v.String() != want {
				t.Errorf("line %q, want %q", v.String(), want)
			}
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.NewReplacer("GO", runtime.Version(), "PLATFORM", platform).Replace(tc.json)
			if string(b) != want {
				t.Errorf("JSON %s, want %s", b, want)
			}
		})
	}
}

// `make build` stamps the version of scripts/version.sh into the binary, so
// `workq version` never says "(devel)" for what make built (issue 28 item
// 12).
func TestMakeBuildStampsVersion(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	want, err := exec.Command(filepath.Join(root, "scripts/version.sh")).Output()
	if err != nil {
		t.Fatalf("scripts/version.sh: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "workq")
	// With go build's own VCS stamping on (as on a machine without
	// GOFLAGS=-buildvcs=false), which writes a pseudo-version of its own.
	mk := exec.Command("make", "-s", "-C", root, "build", "BIN="+bin)
	mk.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true")
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("workq version: %v", err)
	}
	var v versionInfo
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("workq version --json printed %q: %v", out, err)
	}
	if v.Version != strings.TrimSpace(string(want)) || !strings.HasPrefix(v.Version, "v") {
		t.Fatalf("make build stamped %q, scripts/version.sh says %q", v.Version, want)
	}
}
