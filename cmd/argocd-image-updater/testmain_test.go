package main

import (
	"testing"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// The controller's binary is built once for the tests that send it signals.
func TestMain(m *testing.M) { testenv.Main(m) }
