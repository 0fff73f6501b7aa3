package credentials

import (
	"testing"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// The tests share one API server (testenv.SharedKube).
func TestMain(m *testing.M) { testenv.Main(m) }
