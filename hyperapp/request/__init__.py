"""What a run asks for, checked once: the method, its parameters, device, threshold and inputs."""
