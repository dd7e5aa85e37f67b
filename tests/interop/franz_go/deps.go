//go:build tools

// Package franzgo pins franz-go, whose kgo integration tests (go test -c
// github.com/twmb/franz-go/pkg/kgo) run against kaflite: tests/interop/test_franz_go.py.
package franzgo

import _ "github.com/twmb/franz-go/pkg/kgo"
