package jobq_test

import (
	"testing"

	"github.com/workq/workq/internal/testdb"
)

// TestMain stops a PostgreSQL server that the examples' test harness started.
func TestMain(m *testing.M) { testdb.Main(m) }
