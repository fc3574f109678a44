internal import COpenSSL

/// Per-connection state that OpenSSL reaches through C callbacks (the write BIO's data pointer
/// and the SSL ex-data slot). Owned by `DTLSTransport`, which frees the SSL (and so the BIO)
/// before this object goes away, so both pointers are held unretained.
final class DTLSConnectionContext {
    let send: @Sendable (UnsafeRawBufferPointer) -> Void
    let mtu: Int
    let initialTimeoutMicroseconds: UInt32
    var datagramsSent = 0

    init(mtu: Int, initialTimeoutMicroseconds: UInt32, send: @escaping @Sendable (UnsafeRawBufferPointer) -> Void) {
        self.mtu = mtu
        self.initialTimeoutMicroseconds = initialTimeoutMicroseconds
        self.send = send
    }
}

/// `int write(BIO *, const char *data, int length)`: OpenSSL calls this once per datagram it
/// wants on the wire (a whole flight fragment, records never split across calls), which is why
/// this BIO exists instead of a memory BIO that would concatenate datagrams.
private func datagramWrite(_ bio: OpaquePointer?, _ data: UnsafePointer<CChar>?, _ length: Int32) -> Int32 {
    guard let bio, let data, length > 0, let pointer = BIO_get_data(bio) else { return -1 }
    let context = Unmanaged<DTLSConnectionContext>.fromOpaque(pointer).takeUnretainedValue()
    context.datagramsSent += 1
    context.send(UnsafeRawBufferPointer(start: data, count: Int(length)))
    return length
}

/// `long ctrl(BIO *, int cmd, long larg, void *parg)`: answers the questions the DTLS layer asks
/// of a datagram BIO; a fixed MTU because path MTU discovery is not available over ICE.
private func datagramControl(
    _ bio: OpaquePointer?,
    _ command: Int32,
    _ argument: Int,
    _ pointer: UnsafeMutableRawPointer?
)
    -> Int
{
    switch command {
    case BIO_CTRL_FLUSH: return 1
    case BIO_CTRL_DGRAM_QUERY_MTU, BIO_CTRL_DGRAM_GET_MTU:
        guard let bio, let data = BIO_get_data(bio) else { return 1200 }
        return Unmanaged<DTLSConnectionContext>.fromOpaque(data).takeUnretainedValue().mtu
    default: return 0
    }
}

/// `int create(BIO *)`: marks the BIO usable; its data pointer is set right after creation.
private func datagramCreate(_ bio: OpaquePointer?) -> Int32 {
    BIO_set_init(bio, 1)
    return 1
}

/// `int destroy(BIO *)`: nothing to free, the context is owned by the transport.
private func datagramDestroy(_ bio: OpaquePointer?) -> Int32 {
    BIO_set_data(bio, nil)
    return 1
}

/// The BIO_METHOD, built once per process and never freed. OpaquePointer is not Sendable, hence
/// nonisolated(unsafe); it is written once by the global's thread-safe initializer, then only read.
nonisolated(unsafe) let datagramBIOMethod: OpaquePointer? = {
    guard let method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "conclave datagram writer") else {
        return nil
    }
    BIO_meth_set_write(method, datagramWrite)
    BIO_meth_set_ctrl(method, datagramControl)
    BIO_meth_set_create(method, datagramCreate)
    BIO_meth_set_destroy(method, datagramDestroy)
    return method
}()

/// The SSL ex-data slot holding the connection context, allocated once per process.
let connectionContextIndex: Int32 = CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_SSL, 0, nil, nil, nil, nil)

/// `unsigned int timer_cb(SSL *, unsigned int timer_us)`: the retransmission timer in
/// microseconds. 0 means "first flight": start from the configured value; then double, capped
/// at 60 s (RFC 6347 section 4.2.4.1).
func dtlsTimer(_ ssl: OpaquePointer?, _ previous: UInt32) -> UInt32 {
    if previous == 0 {
        guard let ssl, let data = SSL_get_ex_data(ssl, connectionContextIndex) else { return 1_000_000 }
        return Unmanaged<DTLSConnectionContext>.fromOpaque(data).takeUnretainedValue().initialTimeoutMicroseconds
    }
    return min(previous * 2, 60_000_000)
}
