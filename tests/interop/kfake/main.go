// Command kfake runs franz-go's fake Kafka cluster (pkg/kfake) for kaflite's interop
// tests, driven over stdin by kaflite.testing.KFake.
//
// Usage: kfake -brokers N [-ports p1,p2,...]
//
// Once every broker listens it prints one line, then answers one line per command:
//
//	ready <controller> <node>=<host:port> ...
//
//	nodes                        ok <node>=<host:port> ...   (the brokers listening now)
//	leader <topic> <partition>   ok <node>
//	move <topic> <partition> <n> ok <n>                      (MoveTopicPartition)
//	kill <node>                  ok                          (RemoveNode, its connections cut)
//	restart <node>               ok <port>                   (AddNode on the same id and port)
//
// A command that cannot work answers "unsupported <reason>", a failed one "error <message>".
// It exits on "quit" or at the end of stdin, so it never outlives the process that started it.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
)

// trackingListener remembers the connections it accepted, so that a killed broker's
// clients see their connections drop, as after a crash; kfake's RemoveNode only closes
// the listening socket.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

type trackedConn struct {
	net.Conn
	ln *trackingListener
}

func (c *trackedConn) Close() error {
	c.ln.mu.Lock()
	delete(c.ln.conns, c)
	c.ln.mu.Unlock()
	return c.Conn.Close()
}

func (l *trackingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: conn, ln: l}
	l.mu.Lock()
	l.conns[tc] = struct{}{}
	l.mu.Unlock()
	return tc, nil
}

func (l *trackingListener) cut() {
	l.mu.Lock()
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

type harness struct {
	cluster    *kfake.Cluster
	controller int32
	mu         sync.Mutex
	byPort     map[int]*trackingListener // every listener kfake opened, by its port
	ports      map[int32]int             // each node's port, kept across kill and restart
}

func (h *harness) listen(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	tl := &trackingListener{Listener: ln, conns: make(map[net.Conn]struct{})}
	h.mu.Lock()
	h.byPort[ln.Addr().(*net.TCPAddr).Port] = tl
	h.mu.Unlock()
	return tl, nil
}

// live lists the listening brokers as node=host:port, by node id.
func (h *harness) live() string {
	listening := make(map[int]bool)
	for _, addr := range h.cluster.ListenAddrs() {
		_, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		listening[p] = true
	}
	var nodes []int
	for n, p := range h.ports {
		if listening[p] {
			nodes = append(nodes, int(n))
		}
	}
	sort.Ints(nodes)
	parts := make([]string, 0, len(nodes))
	for _, n := range nodes {
		parts = append(parts, fmt.Sprintf("%d=127.0.0.1:%d", n, h.ports[int32(n)]))
	}
	return strings.Join(parts, " ")
}

func int32Arg(s string) (int32, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	return int32(n), err
}

// do runs one command and returns its answer line.
func (h *harness) do(fields []string) string {
	bad := "error usage: nodes | leader <topic> <partition> | move <topic> <partition> <node>" +
		" | kill <node> | restart <node> | quit"
	switch {
	case len(fields) == 1 && fields[0] == "nodes":
		return "ok " + h.live()
	case len(fields) == 3 && (fields[0] == "leader"):
		p, err := int32Arg(fields[2])
		if err != nil {
			return bad
		}
		return fmt.Sprintf("ok %d", h.cluster.LeaderFor(fields[1], p))
	case len(fields) == 4 && fields[0] == "move":
		p, err1 := int32Arg(fields[2])
		n, err2 := int32Arg(fields[3])
		if err1 != nil || err2 != nil {
			return bad
		}
		if err := h.cluster.MoveTopicPartition(fields[1], p, n); err != nil {
			return "error " + err.Error()
		}
		return fmt.Sprintf("ok %d", n)
	case len(fields) == 2 && (fields[0] == "kill" || fields[0] == "restart"):
		n, err := int32Arg(fields[1])
		if err != nil {
			return bad
		}
		port, known := h.ports[n]
		if !known {
			return fmt.Sprintf("error node %d not found", n)
		}
		if fields[0] == "kill" {
			return h.kill(n, port)
		}
		if _, _, err := h.cluster.AddNode(n, port); err != nil {
			return "error " + err.Error()
		}
		return fmt.Sprintf("ok %d", port)
	}
	return bad
}

func (h *harness) kill(n int32, port int) string {
	if n == h.controller {
		// kfake fixes its controller at start: CreateTopics and friends must go to that
		// broker, and a node added back is a new broker that never becomes it.
		return fmt.Sprintf("unsupported node %d is kfake's controller, which it never moves", n)
	}
	if err := h.cluster.RemoveNode(n); err != nil {
		return "unsupported " + err.Error()
	}
	h.mu.Lock()
	ln := h.byPort[port]
	delete(h.byPort, port)
	h.mu.Unlock()
	if ln != nil {
		ln.cut()
	}
	return "ok"
}

func main() {
	brokers := flag.Int("brokers", 1, "the number of brokers")
	portList := flag.String("ports", "", "the brokers' ports, comma-separated (default: free ports)")
	flag.Parse()

	h := &harness{byPort: make(map[int]*trackingListener), ports: make(map[int32]int)}
	opts := []kfake.Opt{kfake.NumBrokers(*brokers), kfake.ListenFn(h.listen),
		kfake.DefaultNumPartitions(1)}
	if *portList != "" {
		var ports []int
		for _, s := range strings.Split(*portList, ",") {
			p, err := strconv.Atoi(s)
			if err != nil {
				fmt.Fprintf(os.Stderr, "kfake: bad port %q\n", s)
				os.Exit(2)
			}
			ports = append(ports, p)
		}
		opts = append(opts, kfake.Ports(ports...))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfake: %v\n", err)
		os.Exit(1)
	}
	defer cluster.Close()
	h.cluster = cluster
	// kfake numbers its brokers 0..n-1 in the order of ListenAddrs; the last is the controller
	for i, addr := range cluster.ListenAddrs() {
		_, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		h.ports[int32(i)] = p
		h.controller = int32(i)
	}
	fmt.Printf("ready %d %s\n", h.controller, h.live())

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fields := strings.Fields(in.Text())
		if len(fields) == 0 {
			continue
		}
		if fields[0] == "quit" {
			return
		}
		fmt.Println(h.do(fields))
	}
}
