package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"serverlab/contestants/go-nethttp/labpb"
)

// The gRPC service of spec §16, served by grpc-go's ServeHTTP on the same net/http servers
// as every other part, so that the h2c port and the TLS port's h2 carry it beside /perf.
// grpc-go's defaults are the spec's: a 4 MiB receive limit (RESOURCE_EXHAUSTED above it),
// UNIMPLEMENTED for unknown methods, grpc-timeout as the call's deadline.

// isGRPC: an HTTP/2 request whose content-type is application/grpc or application/grpc+...;
// gRPC needs HTTP/2, so HTTP/1.1 requests go to the usual routes whatever they carry.
func isGRPC(r *http.Request) bool {
	return r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc")
}

func newGRPCServer(hub *pushHub) *grpc.Server {
	server := grpc.NewServer()
	labpb.RegisterLabServer(server, &labService{hub: hub})
	return server
}

type labService struct {
	labpb.UnimplementedLabServer
	hub *pushHub
}

var perfReply = &labpb.PerfReply{Body: perfBody}

func (*labService) Perf(context.Context, *labpb.PerfRequest) (*labpb.PerfReply, error) {
	return perfReply, nil
}

func (*labService) Echo(_ context.Context, message *labpb.EchoMessage) (*labpb.EchoMessage, error) {
	return message, nil
}

// Chat echoes every message as it is read; the client's end of its side ends the call OK.
func (*labService) Chat(stream grpc.BidiStreamingServer[labpb.EchoMessage, labpb.EchoMessage]) error {
	for {
		message, err := stream.Recv()
		if err != nil {
			return endOfStream(stream.Context(), err)
		}
		if err := stream.Send(message); err != nil {
			return err
		}
	}
}

// endOfStream is what a call ends with once its client stopped sending: OK at the end of
// its side, the context's status (deadline, cancellation) when that ended it.
func endOfStream(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// Subscribe holds the stream as a subscriber of its events, beside the other transports'
// (one snapshot spans them all, spec §6), until its deadline or its cancellation.
func (l *labService) Subscribe(request *labpb.SubscribeRequest, stream grpc.ServerStreamingServer[labpb.Delivery]) error {
	if reason := distinctNames(request.Events); reason != "" {
		return status.Error(codes.InvalidArgument, reason)
	}
	st := l.hub.stats
	st.grpc.open.Add(1)
	defer st.grpc.open.Add(-1)
	sub := newSubscriber(grpcStream, nil, newOutbox())
	l.hub.subscribe(sub, request.Events, nil)
	defer l.hub.leave(sub)
	ctx := stream.Context()
	for {
		select {
		case <-sub.out.wake:
			items, ok := sub.out.take()
			if err := sendDeliveries(stream, items); err != nil {
				return err
			}
			if !ok {
				return status.Error(codes.ResourceExhausted, "the subscriber fell too far behind")
			}
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// sendDeliveries sends each queued delivery, its `sent` stamped right before its Send.
func sendDeliveries(stream grpc.ServerStreamingServer[labpb.Delivery], items []message) error {
	for _, item := range items {
		cycle := item.cycle
		delivery := &labpb.Delivery{Name: cycle.name, Seq: cycle.seq, Created: cycle.created,
			Total: int64(cycle.total), Place: int64(item.place), Data: string(cycle.data)}
		delivery.Sent = cycle.stamp()
		if err := stream.Send(delivery); err != nil {
			return err
		}
	}
	return nil
}
