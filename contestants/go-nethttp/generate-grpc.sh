#!/bin/sh
# Generates labpb/ (messages and service stubs) from the spec's committed .proto with the
# protoc plugins pinned as tools in go.mod; protoc comes from Debian (debian_packages).
# The generated code is a build output, never committed, like every contestant's.
set -eu
cd "$(dirname "$0")"
export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false"
mkdir -p build labpb
go build -o build/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
go build -o build/protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc
package=Mserverlab.proto=serverlab/contestants/go-nethttp/labpb
protoc -I ../../spec/grpc \
  --plugin=protoc-gen-go=build/protoc-gen-go --plugin=protoc-gen-go-grpc=build/protoc-gen-go-grpc \
  --go_out=labpb --go_opt=paths=source_relative --go_opt="$package" \
  --go-grpc_out=labpb --go-grpc_opt=paths=source_relative --go-grpc_opt="$package" \
  serverlab.proto
