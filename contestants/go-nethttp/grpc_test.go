package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"serverlab/contestants/go-nethttp/labpb"
)

// startGRPC serves a real server's h2c port on loopback and dials it with grpc-go's client.
func startGRPC(t *testing.T) (*server, labpb.LabClient, *grpc.ClientConn) {
	t.Helper()
	srv, err := newServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	listeners, err := listenHTTP([]string{loopback}, 0)
	if err != nil {
		t.Fatal(err)
	}
	h2c := withHTTP2Settings(newH2CServer(srv))
	go h2c.Serve(listeners[0])
	t.Cleanup(func() { h2c.Close() })
	conn, err := grpc.NewClient("passthrough:///"+listeners[0].Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return srv, labpb.NewLabClient(conn), conn
}

func expectCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("status %v (%v), want %v", got, err, want)
	}
}

func TestGRPCPerfAnswersTheFixedBodyAndCountsTheCall(t *testing.T) {
	srv, client, _ := startGRPC(t)
	reply, err := client.Perf(context.Background(), &labpb.PerfRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if string(reply.Body) != string(perfBody) || len(reply.Body) != 84 {
		t.Fatalf("body %q", reply.Body)
	}
	if calls := srv.stats.grpc.calls.Load(); calls != 1 {
		t.Fatalf("grpc.calls = %d, want 1", calls)
	}
}

// The limit is on the encoded request: 5 bytes of tag and length go with 4 MiB - 5 of data.
func TestGRPCEchoServesFourMebibytesAndRefusesOneByteMore(t *testing.T) {
	_, client, _ := startGRPC(t)
	for _, size := range []int{0, 1, 100_000, 4<<20 - 5} {
		data := []byte(strings.Repeat("x", size))
		reply, err := client.Echo(context.Background(), &labpb.EchoMessage{Data: data})
		if err != nil || string(reply.Data) != string(data) {
			t.Fatalf("size %d: %v, %d bytes back", size, err, len(reply.GetData()))
		}
	}
	_, err := client.Echo(context.Background(), &labpb.EchoMessage{Data: make([]byte, 4<<20-4)})
	expectCode(t, err, codes.ResourceExhausted)
	if _, err := client.Perf(context.Background(), &labpb.PerfRequest{}); err != nil {
		t.Fatalf("the connection serves on after a refusal: %v", err)
	}
}

func TestGRPCUnknownMethodsAreUnimplemented(t *testing.T) {
	_, _, conn := startGRPC(t)
	for _, method := range []string{"/serverlab.v1.Lab/Nope", "/other.v1.Service/Perf"} {
		err := conn.Invoke(context.Background(), method, &labpb.PerfRequest{}, &labpb.PerfReply{})
		expectCode(t, err, codes.Unimplemented)
	}
}

func TestGRPCChatEchoesEveryMessageInOrderAndEndsOK(t *testing.T) {
	_, client, _ := startGRPC(t)
	chat, err := client.Chat(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	words := []string{"one", "two", "", "four"}
	for _, word := range words {
		if err := chat.Send(&labpb.EchoMessage{Data: []byte(word)}); err != nil {
			t.Fatal(err)
		}
	}
	chat.CloseSend()
	for _, word := range words {
		message, err := chat.Recv()
		if err != nil || string(message.Data) != word {
			t.Fatalf("got %q, %v; want %q", message.GetData(), err, word)
		}
	}
	if _, err := chat.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("the call ends OK after the client's end: %v", err)
	}
}

func TestGRPCSubscribeCarriesEachCycleThenEndsAtItsDeadline(t *testing.T) {
	srv, client, _ := startGRPC(t)
	ctx, cancel := context.WithTimeout(context.Background(), 900*time.Millisecond)
	defer cancel()
	stream, err := client.Subscribe(ctx, &labpb.SubscribeRequest{Events: []string{"g1"}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the subscriber", func() bool { return srv.stats.grpc.open.Load() == 1 })
	srv.push.set("g1", 50)
	defer srv.push.clear("g1")
	var last int64
	for range 3 {
		delivery, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if delivery.Name != "g1" || (last != 0 && delivery.Seq != last+1) || delivery.Sent < delivery.Created ||
			delivery.Total != 1 || delivery.Place != 1 {
			t.Fatalf("delivery %v after seq %d", delivery, last)
		}
		last = delivery.Seq
	}
	for err == nil {
		_, err = stream.Recv()
	}
	expectCode(t, err, codes.DeadlineExceeded)
	waitFor(t, "the stream to be noticed gone", func() bool { return srv.stats.grpc.open.Load() == 0 })
	if got := srv.stats.grpc.deliveries.Load(); got < 3 {
		t.Fatalf("grpc.deliveries = %d", got)
	}
}

func TestGRPCACancelledSubscribeIsNoticedGone(t *testing.T) {
	srv, client, _ := startGRPC(t)
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := client.Subscribe(ctx, &labpb.SubscribeRequest{Events: []string{"g2"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the subscriber", func() bool { return srv.stats.subscribers.Load() == 1 })
	cancel()
	waitFor(t, "the cancelled stream to leave", func() bool {
		return srv.stats.grpc.open.Load() == 0 && srv.stats.subscribers.Load() == 0
	})
}

func TestGRPCSubscribeRefusesBadEventLists(t *testing.T) {
	_, client, _ := startGRPC(t)
	for _, events := range [][]string{nil, {"bad name"}, {"a", "a"}} {
		stream, err := client.Subscribe(context.Background(), &labpb.SubscribeRequest{Events: events})
		if err == nil {
			_, err = stream.Recv()
		}
		expectCode(t, err, codes.InvalidArgument)
	}
}
