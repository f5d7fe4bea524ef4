"""The AWS EC2 backend (boto3, the `aws` extra; imported lazily by the backend registry).

Modules: `backend` (the Backend: launch, status, preempt, stop), `launch` (the exact EC2
request dicts, pure), `userdata` (the cloud-init script), `agent` (runs on the instance),
`ami` (image lookup), `prices` (spot price history as a market trace), `gc` (leftovers by tag).
The code and settings travel through the job's store as for every cloud (`backends/shipping.py`).
See docs/aws.md.
"""
