package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"postgres://app@db:5432/prod", "postgres://app@db:5432/prod"},
		{"postgres://app:s3cret@db:5432/prod?sslmode=require", "postgres://app:xxxxx@db:5432/prod?sslmode=require"},
		{"postgresql://app:p%40ss@db/prod", "postgresql://app:xxxxx@db/prod"},
		{"postgres://db/prod?user=app&password=s3cret", "postgres://db/prod?password=xxxxx&user=app"},
		{"postgres://app:s3cret@h1:5432,h2:5432/prod", "postgres://app:xxxxx@h1:5432,h2:5432/prod"},
		{"host=db user=app password=s3cret dbname=prod", "host=db user=app password=xxxxx dbname=prod"},
		{"host=db password='s3 \\'cret' dbname=prod", "host=db password=xxxxx dbname=prod"},
		{"nats://u:s3cret@n1:4222,nats://n2:4222", "nats://u:xxxxx@n1:4222,nats://n2:4222"},
		{"mysql://root:s3cret@db/app", "mysql://root:xxxxx@db/app"},
		{"postgres://app:pa,s3cret@db/prod", "postgres://app:xxxxx@db/prod"},
		{"postgres://app:s3,cret@h1:5432,h2:5432/prod", "postgres://app:xxxxx@h1:5432,h2:5432/prod"},
		{"postgres://app:s3cr@t@db/prod", "postgres://app:xxxxx@db/prod"},
		{"nats://u:s3,cret@n1:4222,nats://v:s3cret@n2:4222", "nats://u:xxxxx@n1:4222,nats://v:xxxxx@n2:4222"},
	} {
		got := URL(tc.in)
		if got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "s3") || strings.Contains(got, "cret") {
			t.Errorf("URL(%q) = %q still shows the password", tc.in, got)
		}
	}
}
