//go:build tools

// Package sarama pins IBM/sarama, whose functional tests (go test -c -tags functional
// github.com/IBM/sarama) run against kaflite, and toxiproxy, the TCP proxy those tests
// expect in front of the brokers: tests/interop/test_sarama_suite.py.
package sarama

import (
	_ "github.com/IBM/sarama"
	_ "github.com/Shopify/toxiproxy/v2/cmd/server"
)
