package gen

import (
	"os"
	"regexp"
	"testing"
)

// The hand-written JobRunsClaimAppend must pass the arguments and scan the
// columns of the generated JobRunsClaim, in the same order: when the query
// changes, make generate rewrites the one and this test names the other.
func TestJobRunsClaimAppendMatchesGenerated(t *testing.T) {
	parts := func(file, fn string) (args, scans string) {
		t.Helper()
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		body := regexp.MustCompile(`(?s)func \(q \*Queries\) ` + fn + `\(.*?\n}\n`).Find(src)
		if body == nil {
			t.Fatalf("%s: no func %s", file, fn)
		}
		a := regexp.MustCompile(`(?s)q\.db\.Query\(ctx, jobRunsClaim,(.*?)\n\t\)`).FindSubmatch(body)
		s := regexp.MustCompile(`(?s)rows\.Scan\((.*?)\); err != nil`).FindSubmatch(body)
		if a == nil || s == nil {
			t.Fatalf("%s: %s has no Query or Scan call this test can read", file, fn)
		}
		return string(a[1]), string(s[1])
	}
	genArgs, genScans := parts("job_runs.sql.go", "JobRunsClaim")
	appArgs, appScans := parts("claim_append.go", "JobRunsClaimAppend")
	if genArgs != appArgs {
		t.Errorf("JobRunsClaimAppend's arguments differ from JobRunsClaim's:\n%s\nwant:\n%s", appArgs, genArgs)
	}
	if genScans != appScans {
		t.Errorf("JobRunsClaimAppend scans other columns than JobRunsClaim:\n%s\nwant:\n%s", appScans, genScans)
	}
}
