"""The platform half: what is installed through the Kubernetes provider (Helm releases and objects) once a
cluster answers: CNI, storage, monitoring, the GPU Operator, Kueue, serving, training and the stack's workloads."""
