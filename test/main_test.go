// Package test holds workq's integration tests: every one runs against a real
// PostgreSQL server (see internal/testdb for where it comes from).
package test

import (
	"testing"

	"github.com/workq/workq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.MainOwnCluster(m) }
