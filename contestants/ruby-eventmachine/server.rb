#!/usr/bin/env ruby
# frozen_string_literal: true

# serverlab contestant ruby-eventmachine: one EventMachine reactor serving
# HTTP/1.1 (with SSE and WebSocket) and syslog (TCP and UDP) on 127.0.0.1,
# and on a second address when --host names one; with --grpc-port, Debian's
# ruby-grpc server beside it in the same process, on threads of its own.

require "ipaddr"
require "optparse"
require "socket"
require_relative "lib/serverlab_em"

LOOPBACK = "127.0.0.1"
# EM.start_server listens with a backlog of 100, which overflows (and costs
# clients a 1 s SYN retransmit) when thousands of push clients connect at
# once; so the TCP listeners are opened here with a deep backlog and attached.
LISTEN_BACKLOG = 4096

def parse_options(argv)
  options = { name: "ruby-eventmachine", chunk_size: 65_536, yjit: "off", host: LOOPBACK, syslog_mode: "count",
              grpc_threads: 200 }
  OptionParser.new do |parser|
    parser.banner = "usage: server.rb --port N [--syslog-port N] [--syslog-mode count|parse] [--host ADDRESS] [--docroot DIR] [--chunk-size BYTES] [--signals-file PATH]"
    parser.on("--port N", Integer, "HTTP port") { |v| options[:port] = v }
    parser.on("--syslog-port N", Integer, "syslog port, TCP and UDP") { |v| options[:syslog_port] = v }
    parser.on("--syslog-mode MODE", ServerlabEM::SyslogReceiver::MODES, "count syslog messages, or parse each one too") do |v|
      options[:syslog_mode] = v
    end
    parser.on("--host ADDRESS", "an address to listen on besides 127.0.0.1") { |v| options[:host] = v }
    parser.on("--docroot DIR", "document root for /files") { |v| options[:docroot] = v }
    parser.on("--chunk-size BYTES", Integer, "read size when streaming files") { |v| options[:chunk_size] = v }
    parser.on("--name NAME", "name reported by /stats") { |v| options[:name] = v }
    parser.on("--yjit MODE", %w[on off], "run on Ruby's YJIT compiler (on|off)") { |v| options[:yjit] = v }
    parser.on("--signals-file PATH", "append runtime signals (GC, reactor lag) as JSON lines") do |v|
      options[:signals_file] = v
    end
    parser.on("--tls-port N", Integer, "HTTPS port (Ruby's openssl on the reactor)") { |v| options[:tls_port] = v }
    parser.on("--tls-cert PATH", "server certificate, PEM") { |v| options[:tls_cert] = v }
    parser.on("--tls-key PATH", "its private key, PEM") { |v| options[:tls_key] = v }
    parser.on("--syslog-tls-port N", Integer, "RFC 5425 syslog over TLS port") { |v| options[:syslog_tls_port] = v }
    parser.on("--grpc-port N", Integer, "gRPC port, prior knowledge (ruby-grpc)") { |v| options[:grpc_port] = v }
    parser.on("--grpc-tls-port N", Integer, "gRPC over TLS port (ALPN h2)") { |v| options[:grpc_tls_port] = v }
    parser.on("--grpc-threads N", Integer, "ruby-grpc's thread pool: one per call in progress") do |v|
      options[:grpc_threads] = v
    end
    parser.on("--version", "print runtime and library versions") { options[:version] = true }
  end.parse!(argv)
  options
rescue OptionParser::ParseError => e
  abort("server.rb: #{e.message}")
end

def versions
  require "thin/version"
  "ruby #{RUBY_VERSION}p#{RUBY_PATCHLEVEL} eventmachine #{EM::VERSION} thin_parser #{Thin::VERSION::STRING} " \
    "websocket-driver #{Gem::Specification.find_by_name('websocket-driver').version} json #{JSON::VERSION} " \
    "openssl #{OpenSSL::VERSION} (#{OpenSSL::OPENSSL_LIBRARY_VERSION})#{grpc_versions}"
end

def grpc_versions
  require "grpc"
  " grpc #{GRPC::VERSION} google-protobuf #{Gem::Specification.find_by_name('google-protobuf').version}"
rescue LoadError, Gem::MissingSpecError
  " (no grpc)"
end

# Long-poll and comet runs hold tens of thousands of sockets; take every
# descriptor the hard limit allows.
def raise_descriptor_limit
  _soft, hard = Process.getrlimit(:NOFILE)
  Process.setrlimit(:NOFILE, hard)
rescue Errno::EPERM, Errno::EINVAL
  nil
end

def ip_address?(text)
  IPAddr.new(text)
  true
rescue IPAddr::InvalidAddressError
  false
end

def validate!(options)
  abort("server.rb: --port is required") unless options[:port]
  abort("server.rb: --chunk-size must be positive") unless options[:chunk_size].positive?
  abort("server.rb: --host #{options[:host]} is not an IP address") unless ip_address?(options[:host])
  docroot = options[:docroot]
  abort("server.rb: docroot #{docroot} is not a directory") if docroot && !File.directory?(docroot)
  validate_tls!(options)
  validate_grpc!(options)
end

def validate_grpc!(options)
  abort("server.rb: --grpc-tls-port needs --grpc-port") if options[:grpc_tls_port] && !options[:grpc_port]
  abort("server.rb: --grpc-threads must be positive") unless options[:grpc_threads].positive?
end

# A missing or unreadable key or certificate is refused here, before listening.
def validate_tls!(options)
  return unless options[:tls_port] || options[:syslog_tls_port] || options[:grpc_tls_port]

  %i[tls_cert tls_key].each do |key|
    flag = "--#{key.to_s.tr('_', '-')}"
    abort("server.rb: --tls-port, --syslog-tls-port or --grpc-tls-port needs #{flag}") unless options[key]
    abort("server.rb: #{flag} #{options[key]} is not a readable file") unless File.file?(options[key]) && File.readable?(options[key])
  end
end

# 127.0.0.1, and the --host address when it is another one (a lab or
# cluster host's, where the load comes from other machines).
def addresses(options)
  [LOOPBACK, options[:host]].uniq
end

def listener(address, port)
  socket = Socket.new(Addrinfo.tcp(address, port).afamily, :STREAM)
  socket.setsockopt(:SOCKET, :REUSEADDR, true)
  socket.bind(Addrinfo.tcp(address, port))
  socket.listen(LISTEN_BACKLOG)
  socket
end

# YJIT can only be switched on when Ruby starts (before 3.3), so the server
# replaces itself with a YJIT-enabled interpreter: same pid, still foreground.
# Ruby 3.1's YJIT makes its whole code region resident at start (276 MB RSS
# with the default 256 MB region); this server's hot code fits in a few MB.
YJIT_EXEC_MEM_MB = 16

def ensure_yjit(options)
  return unless options[:yjit] == "on"
  return if defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled?

  exec(RbConfig.ruby, "--yjit", "--yjit-exec-mem-size=#{YJIT_EXEC_MEM_MB}", __FILE__, *ORIGINAL_ARGV)
end

def serve(app, options, address, contexts)
  EM.attach_server(listener(address, options[:port]), ServerlabEM::HttpConnection, app)
  if options[:tls_port]
    ServerlabEM::TlsListener.watch(listener(address, options[:tls_port]), contexts[:https], ServerlabEM::TlsHttpConnection, app)
  end
  serve_syslog(app, options, address, contexts[:syslog])
end

def serve_syslog(app, options, address, tls_context)
  receiver = ServerlabEM::SyslogReceiver.new(app.stats, options[:syslog_mode])
  if options[:syslog_port]
    EM.attach_server(listener(address, options[:syslog_port]), ServerlabEM::SyslogTcpConnection, receiver)
    EM.open_datagram_socket(address, options[:syslog_port], ServerlabEM::SyslogUdpHandler, receiver)
  end
  return unless options[:syslog_tls_port]

  ServerlabEM::TlsListener.watch(listener(address, options[:syslog_tls_port]), tls_context, ServerlabEM::SyslogTlsConnection, receiver)
end

# One OpenSSL context per TLS port (its sessions resume across connections),
# made before listening so that a key that does not parse stops the start.
def tls_contexts(options)
  return {} unless options[:tls_port] || options[:syslog_tls_port]

  files = { cert: options[:tls_cert], key: options[:tls_key] }
  { https: ServerlabEM::Tls.context(**files, alpn: true), syslog: ServerlabEM::Tls.context(**files, alpn: false) }
rescue OpenSSL::OpenSSLError, ArgumentError => e
  abort("server.rb: --tls-cert/--tls-key: #{e.message}")
end

def run(options)
  validate!(options)
  ensure_yjit(options)
  raise_descriptor_limit
  app = ServerlabEM::App.new(name: options[:name], docroot: options[:docroot], chunk_size: options[:chunk_size])
  contexts = tls_contexts(options)
  require_relative "lib/serverlab_em/grpc_server" if options[:grpc_port]
  EM.epoll
  EM.set_max_timers(1_000_000)
  grpc = nil
  EM.run do
    %w[TERM INT].each { |signal| Signal.trap(signal) { EM.stop } }
    addresses(options).each { |address| serve(app, options, address, contexts) }
    # Started once the reactor runs: its calls join the push hub through it.
    grpc = ServerlabEM::Grpc.start(app, options, addresses(options)) if options[:grpc_port]
    ServerlabEM::RuntimeSignals.start(options[:signals_file]) if options[:signals_file]
    # Installed only once listening, so a taken port still fails the start.
    # From here on a bug in a timer callback (emitter, long-poll timeout) is
    # reported and the reactor goes on serving everyone else.
    EM.error_handler { |error| ServerlabEM.report_bug(error) }
  end
  # The C core asserts at exit if its server is still running: stop it first.
  grpc&.stop
end

ORIGINAL_ARGV = ARGV.dup.freeze
options = parse_options(ARGV)
if options[:version]
  puts versions
else
  run(options)
end
