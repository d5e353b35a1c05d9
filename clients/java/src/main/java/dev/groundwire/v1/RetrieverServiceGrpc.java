package dev.groundwire.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * Retrieves candidates from a named index.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class RetrieverServiceGrpc {

  private RetrieverServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "groundwire.v1.RetrieverService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.RetrieveRequest,
      dev.groundwire.v1.RetrieveResponse> getRetrieveMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Retrieve",
      requestType = dev.groundwire.v1.RetrieveRequest.class,
      responseType = dev.groundwire.v1.RetrieveResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.RetrieveRequest,
      dev.groundwire.v1.RetrieveResponse> getRetrieveMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.RetrieveRequest, dev.groundwire.v1.RetrieveResponse> getRetrieveMethod;
    if ((getRetrieveMethod = RetrieverServiceGrpc.getRetrieveMethod) == null) {
      synchronized (RetrieverServiceGrpc.class) {
        if ((getRetrieveMethod = RetrieverServiceGrpc.getRetrieveMethod) == null) {
          RetrieverServiceGrpc.getRetrieveMethod = getRetrieveMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.RetrieveRequest, dev.groundwire.v1.RetrieveResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Retrieve"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.RetrieveRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.RetrieveResponse.getDefaultInstance()))
              .setSchemaDescriptor(new RetrieverServiceMethodDescriptorSupplier("Retrieve"))
              .build();
        }
      }
    }
    return getRetrieveMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static RetrieverServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<RetrieverServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<RetrieverServiceStub>() {
        @java.lang.Override
        public RetrieverServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new RetrieverServiceStub(channel, callOptions);
        }
      };
    return RetrieverServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static RetrieverServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<RetrieverServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<RetrieverServiceBlockingV2Stub>() {
        @java.lang.Override
        public RetrieverServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new RetrieverServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return RetrieverServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static RetrieverServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<RetrieverServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<RetrieverServiceBlockingStub>() {
        @java.lang.Override
        public RetrieverServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new RetrieverServiceBlockingStub(channel, callOptions);
        }
      };
    return RetrieverServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static RetrieverServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<RetrieverServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<RetrieverServiceFutureStub>() {
        @java.lang.Override
        public RetrieverServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new RetrieverServiceFutureStub(channel, callOptions);
        }
      };
    return RetrieverServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * Retrieves candidates from a named index.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * Runs one query. Errors: INVALID_ARGUMENT (bad query, filter, top_k, mode),
     * NOT_FOUND (unknown index), FAILED_PRECONDITION (semantic/hybrid on an
     * index without an embedding model, or INDEX_REBUILD_REQUIRED while the
     * published version was embedded for other query settings), UNAVAILABLE
     * (store or embedding provider down, index not ready), DEADLINE_EXCEEDED.
     * </pre>
     */
    default void retrieve(dev.groundwire.v1.RetrieveRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.RetrieveResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRetrieveMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service RetrieverService.
   * <pre>
   * Retrieves candidates from a named index.
   * </pre>
   */
  public static abstract class RetrieverServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return RetrieverServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service RetrieverService.
   * <pre>
   * Retrieves candidates from a named index.
   * </pre>
   */
  public static final class RetrieverServiceStub
      extends io.grpc.stub.AbstractAsyncStub<RetrieverServiceStub> {
    private RetrieverServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected RetrieverServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new RetrieverServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Runs one query. Errors: INVALID_ARGUMENT (bad query, filter, top_k, mode),
     * NOT_FOUND (unknown index), FAILED_PRECONDITION (semantic/hybrid on an
     * index without an embedding model, or INDEX_REBUILD_REQUIRED while the
     * published version was embedded for other query settings), UNAVAILABLE
     * (store or embedding provider down, index not ready), DEADLINE_EXCEEDED.
     * </pre>
     */
    public void retrieve(dev.groundwire.v1.RetrieveRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.RetrieveResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRetrieveMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service RetrieverService.
   * <pre>
   * Retrieves candidates from a named index.
   * </pre>
   */
  public static final class RetrieverServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<RetrieverServiceBlockingV2Stub> {
    private RetrieverServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected RetrieverServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new RetrieverServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Runs one query. Errors: INVALID_ARGUMENT (bad query, filter, top_k, mode),
     * NOT_FOUND (unknown index), FAILED_PRECONDITION (semantic/hybrid on an
     * index without an embedding model, or INDEX_REBUILD_REQUIRED while the
     * published version was embedded for other query settings), UNAVAILABLE
     * (store or embedding provider down, index not ready), DEADLINE_EXCEEDED.
     * </pre>
     */
    public dev.groundwire.v1.RetrieveResponse retrieve(dev.groundwire.v1.RetrieveRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRetrieveMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service RetrieverService.
   * <pre>
   * Retrieves candidates from a named index.
   * </pre>
   */
  public static final class RetrieverServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<RetrieverServiceBlockingStub> {
    private RetrieverServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected RetrieverServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new RetrieverServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Runs one query. Errors: INVALID_ARGUMENT (bad query, filter, top_k, mode),
     * NOT_FOUND (unknown index), FAILED_PRECONDITION (semantic/hybrid on an
     * index without an embedding model, or INDEX_REBUILD_REQUIRED while the
     * published version was embedded for other query settings), UNAVAILABLE
     * (store or embedding provider down, index not ready), DEADLINE_EXCEEDED.
     * </pre>
     */
    public dev.groundwire.v1.RetrieveResponse retrieve(dev.groundwire.v1.RetrieveRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRetrieveMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service RetrieverService.
   * <pre>
   * Retrieves candidates from a named index.
   * </pre>
   */
  public static final class RetrieverServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<RetrieverServiceFutureStub> {
    private RetrieverServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected RetrieverServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new RetrieverServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Runs one query. Errors: INVALID_ARGUMENT (bad query, filter, top_k, mode),
     * NOT_FOUND (unknown index), FAILED_PRECONDITION (semantic/hybrid on an
     * index without an embedding model, or INDEX_REBUILD_REQUIRED while the
     * published version was embedded for other query settings), UNAVAILABLE
     * (store or embedding provider down, index not ready), DEADLINE_EXCEEDED.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.RetrieveResponse> retrieve(
        dev.groundwire.v1.RetrieveRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRetrieveMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_RETRIEVE = 0;

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
        case METHODID_RETRIEVE:
          serviceImpl.retrieve((dev.groundwire.v1.RetrieveRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.RetrieveResponse>) responseObserver);
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
          getRetrieveMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.RetrieveRequest,
              dev.groundwire.v1.RetrieveResponse>(
                service, METHODID_RETRIEVE)))
        .build();
  }

  private static abstract class RetrieverServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    RetrieverServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.groundwire.v1.RetrieverProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("RetrieverService");
    }
  }

  private static final class RetrieverServiceFileDescriptorSupplier
      extends RetrieverServiceBaseDescriptorSupplier {
    RetrieverServiceFileDescriptorSupplier() {}
  }

  private static final class RetrieverServiceMethodDescriptorSupplier
      extends RetrieverServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    RetrieverServiceMethodDescriptorSupplier(java.lang.String methodName) {
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
      synchronized (RetrieverServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new RetrieverServiceFileDescriptorSupplier())
              .addMethod(getRetrieveMethod())
              .build();
        }
      }
    }
    return result;
  }
}
