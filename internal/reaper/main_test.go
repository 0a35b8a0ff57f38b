package reaper_test

import (
	"testing"

	"github.com/workq/workq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }
