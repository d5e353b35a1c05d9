package dev.groundwire.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * Reranks candidates with a configured reranker.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class RerankerServiceGrpc {

  private RerankerServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "groundwire.v1.RerankerService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.RerankRequest,
      dev.groundwire.v1.RerankResponse> getRerankMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Rerank",
      requestType = dev.groundwire.v1.RerankRequest.class,
      responseType = dev.groundwire.v1.RerankResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.RerankRequest,
      dev.groundwire.v1.RerankResponse> getRerankMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.RerankRequest, dev.groundwire.v1.RerankResponse> getRerankMethod;
    if ((getRerankMethod = RerankerServiceGrpc.getRerankMethod) == null) {
      synchronized (RerankerServiceGrpc.class) {
        if ((getRerankMethod = RerankerServiceGrpc.getRerankMethod) == null) {
          RerankerServiceGrpc.getRerankMethod = getRerankMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.RerankRequest, dev.groundwire.v1.RerankResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Rerank"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.RerankRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.RerankResponse.getDefaultInstance()))
              .setSchemaDescriptor(new RerankerServiceMethodDescriptorSupplier("Rerank"))
              .build();
        }
      }
    }
    return getRerankMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static RerankerServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<RerankerServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<RerankerServiceStub>() {
        @java.lang.Override
        public RerankerServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new RerankerServiceStub(channel, callOptions);
        }
      };
    return RerankerServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static RerankerServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<RerankerServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<RerankerServiceBlockingV2Stub>() {
        @java.lang.Override
        public RerankerServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new RerankerServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return RerankerServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static RerankerServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<RerankerServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<RerankerServiceBlockingStub>() {
        @java.lang.Override
        public RerankerServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new RerankerServiceBlockingStub(channel, callOptions);
        }
      };
    return RerankerServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static RerankerServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<RerankerServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<RerankerServiceFutureStub>() {
        @java.lang.Override
        public RerankerServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new RerankerServiceFutureStub(channel, callOptions);
        }
      };
    return RerankerServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * Reranks candidates with a configured reranker.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * Reranks one query's candidates. With RERANK_FAILURE_POLICY_USE_ORIGINAL_ORDER
     * (the default) a reranker that is unavailable, times out, fails or answers
     * invalidly does not fail the call: the response keeps the original order
     * and says so in `reranking` (outcome RERANK_OUTCOME_FALLBACK). Errors:
     * INVALID_ARGUMENT (bad query, candidates, policy, timeout or bound),
     * NOT_FOUND (unknown reranker name, reason RERANKER_NOT_FOUND),
     * FAILED_PRECONDITION (no reranker named and no default configured, reason
     * RERANKER_NOT_CONFIGURED); with RERANK_FAILURE_POLICY_FAIL also UNAVAILABLE
     * (reason RERANKER_FAILED) and DEADLINE_EXCEEDED (reason RERANKER_TIMEOUT),
     * whose google.rpc.ErrorInfo metadata carries the `failure_code`.
     * </pre>
     */
    default void rerank(dev.groundwire.v1.RerankRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.RerankResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRerankMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service RerankerService.
   * <pre>
   * Reranks candidates with a configured reranker.
   * </pre>
   */
  public static abstract class RerankerServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return RerankerServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service RerankerService.
   * <pre>
   * Reranks candidates with a configured reranker.
   * </pre>
   */
  public static final class RerankerServiceStub
      extends io.grpc.stub.AbstractAsyncStub<RerankerServiceStub> {
    private RerankerServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected RerankerServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new RerankerServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Reranks one query's candidates. With RERANK_FAILURE_POLICY_USE_ORIGINAL_ORDER
     * (the default) a reranker that is unavailable, times out, fails or answers
     * invalidly does not fail the call: the response keeps the original order
     * and says so in `reranking` (outcome RERANK_OUTCOME_FALLBACK). Errors:
     * INVALID_ARGUMENT (bad query, candidates, policy, timeout or bound),
     * NOT_FOUND (unknown reranker name, reason RERANKER_NOT_FOUND),
     * FAILED_PRECONDITION (no reranker named and no default configured, reason
     * RERANKER_NOT_CONFIGURED); with RERANK_FAILURE_POLICY_FAIL also UNAVAILABLE
     * (reason RERANKER_FAILED) and DEADLINE_EXCEEDED (reason RERANKER_TIMEOUT),
     * whose google.rpc.ErrorInfo metadata carries the `failure_code`.
     * </pre>
     */
    public void rerank(dev.groundwire.v1.RerankRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.RerankResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRerankMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service RerankerService.
   * <pre>
   * Reranks candidates with a configured reranker.
   * </pre>
   */
  public static final class RerankerServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<RerankerServiceBlockingV2Stub> {
    private RerankerServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected RerankerServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new RerankerServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Reranks one query's candidates. With RERANK_FAILURE_POLICY_USE_ORIGINAL_ORDER
     * (the default) a reranker that is unavailable, times out, fails or answers
     * invalidly does not fail the call: the response keeps the original order
     * and says so in `reranking` (outcome RERANK_OUTCOME_FALLBACK). Errors:
     * INVALID_ARGUMENT (bad query, candidates, policy, timeout or bound),
     * NOT_FOUND (unknown reranker name, reason RERANKER_NOT_FOUND),
     * FAILED_PRECONDITION (no reranker named and no default configured, reason
     * RERANKER_NOT_CONFIGURED); with RERANK_FAILURE_POLICY_FAIL also UNAVAILABLE
     * (reason RERANKER_FAILED) and DEADLINE_EXCEEDED (reason RERANKER_TIMEOUT),
     * whose google.rpc.ErrorInfo metadata carries the `failure_code`.
     * </pre>
     */
    public dev.groundwire.v1.RerankResponse rerank(dev.groundwire.v1.RerankRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRerankMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service RerankerService.
   * <pre>
   * Reranks candidates with a configured reranker.
   * </pre>
   */
  public static final class RerankerServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<RerankerServiceBlockingStub> {
    private RerankerServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected RerankerServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new RerankerServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Reranks one query's candidates. With RERANK_FAILURE_POLICY_USE_ORIGINAL_ORDER
     * (the default) a reranker that is unavailable, times out, fails or answers
     * invalidly does not fail the call: the response keeps the original order
     * and says so in `reranking` (outcome RERANK_OUTCOME_FALLBACK). Errors:
     * INVALID_ARGUMENT (bad query, candidates, policy, timeout or bound),
     * NOT_FOUND (unknown reranker name, reason RERANKER_NOT_FOUND),
     * FAILED_PRECONDITION (no reranker named and no default configured, reason
     * RERANKER_NOT_CONFIGURED); with RERANK_FAILURE_POLICY_FAIL also UNAVAILABLE
     * (reason RERANKER_FAILED) and DEADLINE_EXCEEDED (reason RERANKER_TIMEOUT),
     * whose google.rpc.ErrorInfo metadata carries the `failure_code`.
     * </pre>
     */
    public dev.groundwire.v1.RerankResponse rerank(dev.groundwire.v1.RerankRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRerankMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service RerankerService.
   * <pre>
   * Reranks candidates with a configured reranker.
   * </pre>
   */
  public static final class RerankerServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<RerankerServiceFutureStub> {
    private RerankerServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected RerankerServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new RerankerServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Reranks one query's candidates. With RERANK_FAILURE_POLICY_USE_ORIGINAL_ORDER
     * (the default) a reranker that is unavailable, times out, fails or answers
     * invalidly does not fail the call: the response keeps the original order
     * and says so in `reranking` (outcome RERANK_OUTCOME_FALLBACK). Errors:
     * INVALID_ARGUMENT (bad query, candidates, policy, timeout or bound),
     * NOT_FOUND (unknown reranker name, reason RERANKER_NOT_FOUND),
     * FAILED_PRECONDITION (no reranker named and no default configured, reason
     * RERANKER_NOT_CONFIGURED); with RERANK_FAILURE_POLICY_FAIL also UNAVAILABLE
     * (reason RERANKER_FAILED) and DEADLINE_EXCEEDED (reason RERANKER_TIMEOUT),
     * whose google.rpc.ErrorInfo metadata carries the `failure_code`.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.RerankResponse> rerank(
        dev.groundwire.v1.RerankRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRerankMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_RERANK = 0;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final AsyncService serviceImpl;
    private final int methodId;

    MethodHandlers(AsyncService serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_RERANK:
          serviceImpl.rerank((dev.groundwire.v1.RerankRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.RerankResponse>) responseObserver);
          break;
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getRerankMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.RerankRequest,
              dev.groundwire.v1.RerankResponse>(
                service, METHODID_RERANK)))
        .build();
  }

  private static abstract class RerankerServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    RerankerServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.groundwire.v1.RerankerProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("RerankerService");
    }
  }

  private static final class RerankerServiceFileDescriptorSupplier
      extends RerankerServiceBaseDescriptorSupplier {
    RerankerServiceFileDescriptorSupplier() {}
  }

  private static final class RerankerServiceMethodDescriptorSupplier
      extends RerankerServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    RerankerServiceMethodDescriptorSupplier(java.lang.String methodName) {
      this.methodName = methodName;
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.MethodDescriptor getMethodDescriptor() {
      return getServiceDescriptor().findMethodByName(methodName);
    }
  }

  private static volatile io.grpc.ServiceDescriptor serviceDescriptor;

  public static io.grpc.ServiceDescriptor getServiceDescriptor() {
    io.grpc.ServiceDescriptor result = serviceDescriptor;
    if (result == null) {
      synchronized (RerankerServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new RerankerServiceFileDescriptorSupplier())
              .addMethod(getRerankMethod())
              .build();
        }
      }
    }
    return result;
  }
}
