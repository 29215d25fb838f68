"""Package set-up read from settings.ini (the nbdev 2 layout)."""
from configparser import ConfigParser
import setuptools

cfg = ConfigParser(delimiters=['='])
cfg.read('settings.ini', encoding='utf-8')
cfg = cfg['DEFAULT']

requirements = cfg.get('requirements', '').split()
dev_requirements = cfg.get('dev_requirements', '').split()
extras = {'dev': dev_requirements, 'llamacpp': cfg.get('llamacpp_requirements', '').split(), 'parser': cfg.get('parser_requirements', '').split(),
          'ray': cfg.get('ray_requirements', '').split()}
console_scripts = cfg.get('console_scripts', '').split()

setuptools.setup(
    name=cfg['lib_name'],
    version=cfg['version'],
    description=cfg['description'],
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    author=cfg['author'],
    author_email=cfg['author_email'],
    license='Apache-2.0',
    url=cfg['git_url'],
    keywords=cfg['keywords'].split(),
    python_requires='>=' + cfg['min_python'],
    packages=setuptools.find_packages(include=['megrag_kit', 'megrag_kit.*']),
    package_data={'megrag_kit': ['data/*', 'data/students/*/*', 'profiles/*.toml']},   # the reproduction profiles
    include_package_data=True,
    install_requires=requirements,
    extras_require=extras,
    entry_points={'console_scripts': console_scripts, 'nbdev': [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"]},
    classifiers=['Programming Language :: Python :: 3', 'License :: OSI Approved :: Apache Software License',
                 'Topic :: Scientific/Engineering :: Artificial Intelligence'],
    project_urls={'Source': cfg['git_url']},
    zip_safe=False,
)
