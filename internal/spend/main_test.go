package spend

import (
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, "spend") }
